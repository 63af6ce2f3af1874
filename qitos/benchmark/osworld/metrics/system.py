"""Desktop/system metrics: VLC settings and playback, GNOME settings read by commands, directory
listings and MP3 tags (ID3 read by hand, so no audio library is needed)."""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._util import as_list, match_rule, read_text, rules_value, score, to_number

# ---------------------------------------------------------------- VLC

# VLC defaults for options that vlcrc leaves commented out until the user changes them.
_VLC_DEFAULTS = {
    "qt-max-volume": "125",
    "qt-minimal-view": "0",
    "qt-bgcone": "1",
    "one-instance-when-started-from-file": "1",
    "global-key-play-pause": "",
    "qt-slider-colours": "153;210;153;20;210;20;255;199;15;245;39;29",
    "input-record-path": "",
}


def parse_vlcrc(path: Any) -> dict[str, str] | None:
    text = read_text(path)
    if text is None:
        return None
    values: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            key, _, value = line.partition("=")
            values[key.strip()] = value.strip()
    return values


def _vlc_option(path: Any, name: str) -> str | None:
    values = parse_vlcrc(path)
    return None if values is None else values.get(name, _VLC_DEFAULTS.get(name, ""))


def _vlc_int_check(option: str, rule_key: str) -> Any:
    def metric(result: Any, expected: Any = None, **_: Any) -> float:
        value = _vlc_option(result, option)
        if value is None or not isinstance(expected, Mapping):
            return 0.0
        number = to_number(value)
        return score(number is not None and number == float(expected.get(rule_key, "nan")))

    metric.__name__ = f"check_{option.replace('-', '_')}"
    metric.__doc__ = f"1 iff vlcrc's `{option}` (VLC default when unset) equals `rules.{rule_key}`."
    return metric


check_qt_max_volume = _vlc_int_check("qt-max-volume", "expected_qt_max_volume")
check_qt_minimal_view = _vlc_int_check("qt-minimal-view", "expected_qt_minimal_view")
check_qt_bgcone = _vlc_int_check("qt-bgcone", "expected_qt_bgcone")
check_one_instance_when_started_from_file = _vlc_int_check(
    "one-instance-when-started-from-file", "expected_one_instance_when_started_from_file"
)


def check_global_key_play_pause(result: Any, expected: Any = None, **_: Any) -> float:
    """`rules.expected_global_key_play_pause` 1: a global play/pause hotkey is set; 0: none is set."""
    value = _vlc_option(result, "global-key-play-pause")
    if value is None or not isinstance(expected, Mapping):
        return 0.0
    is_set = value not in ("", "0")
    return score(is_set == bool(int(expected.get("expected_global_key_play_pause", 1))))


_BLACKISH_MAX = 64


def check_qt_slider_colours(result: Any, expected: Any = None, **_: Any) -> float:
    """Rules type `blackish`: every channel of the volume-slider colours is at most 64 (dark).

    Decision: upstream's exact threshold is unknown; 64/255 keeps dark greys and rejects VLC's default
    green-yellow-red gradient.
    """
    value = _vlc_option(result, "qt-slider-colours")
    if value is None or not isinstance(expected, Mapping) or expected.get("type") != "blackish":
        return 0.0
    try:
        channels = [int(v) for v in value.split(";") if v.strip()]
    except ValueError:
        return 0.0
    return score(bool(channels) and all(c <= _BLACKISH_MAX for c in channels))


def is_vlc_recordings_folder(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff vlcrc's `input-record-path` is `rules.recording_file_path`."""
    value = _vlc_option(result, "input-record-path")
    if value is None or not isinstance(expected, Mapping):
        return 0.0
    return score(value.rstrip("/") == str(expected.get("recording_file_path", "")).rstrip("/"))


def is_vlc_playing(result: Any, expected: Any = None, **_: Any) -> float:
    """From VLC's HTTP `status.xml`: state is `playing` and the current item is `rules.file_name` (matched
    against the `filename` meta) or `rules.url` (matched against any meta value)."""
    text = read_text(result)
    if text is None or not isinstance(expected, Mapping):
        return 0.0
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return 0.0
    if (root.findtext("state") or "").strip() != "playing":
        return 0.0
    infos = {i.get("name", ""): (i.text or "").strip() for i in root.iter("info")}
    if expected.get("type") == "file_name":
        name = str(expected.get("file_name", ""))
        return score(infos.get("filename", "").endswith(name) or infos.get("title", "") == name)
    if expected.get("type") == "url":
        url = str(expected.get("url", ""))
        return score(any(url in value for value in infos.values()))
    return 0.0


def is_vlc_fullscreen(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the VLC window size (expected getter) equals the screen size (result getter)."""
    if not isinstance(result, Mapping) or not isinstance(expected, Mapping):
        return 0.0
    return score(
        to_number(result.get("width")) == to_number(expected.get("width"))
        and to_number(result.get("height")) == to_number(expected.get("height"))
    )


# ---------------------------------------------------------------- GNOME / OS


def is_utc_0(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff `timedatectl status` reports a time zone at offset +0000."""
    return score(result is not None and re.search(r"Time zone:.*[+-]0000\)", str(result)) is not None)


def check_text_enlarged(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the GNOME `text-scaling-factor` printed by gsettings is above 1.0."""
    number = to_number(result)
    return score(number is not None and number > 1.0)


def check_gnome_favorite_apps(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the gsettings favourite-apps list equals `rules.expected` as a set."""
    if result is None:
        return 0.0
    text = str(result).strip()
    if text.startswith("@as "):
        text = text[4:]
    try:
        apps = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return 0.0
    return score(set(as_list(apps)) == set(as_list(rules_value(expected))))


def _directory_names(listing: Any) -> set[str] | None:
    if isinstance(listing, Mapping):
        return {str(c.get("name")) for c in listing.get("children", []) if isinstance(c, Mapping)}
    if isinstance(listing, (list, tuple)):
        return {str(Path(str(n)).name) for n in listing}
    if isinstance(listing, str):
        return {line.strip() for line in listing.splitlines() if line.strip()}
    return None


def check_moved_jpgs(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff the directory holds exactly the files named in `rules.expected`."""
    names = _directory_names(result)
    return score(names is not None and names == set(as_list(rules_value(expected))))


# ---------------------------------------------------------------- MP3 tags

_ID3_FRAMES = {"title": ("TIT2", "TT2"), "artist": ("TPE1", "TP1"), "album": ("TALB", "TAL"),
               "year": ("TYER", "TDRC", "TYE"), "genre": ("TCON", "TCO")}


def read_id3(path: Any) -> dict[str, str] | None:
    """Text frames of an ID3v2.2/2.3/2.4 tag, falling back to the ID3v1 trailer; None without a file."""
    if path is None or not Path(path).is_file():
        return None
    data = Path(path).read_bytes()
    frames: dict[str, str] = {}
    if data[:3] == b"ID3" and len(data) >= 10:
        version = data[3]
        size = _synchsafe(data[6:10])
        body = data[10 : 10 + size]
        pos, header = 0, (6 if version == 2 else 10)
        while pos + header <= len(body):
            frame_id = body[pos : pos + (3 if version == 2 else 4)].decode("latin-1", "replace")
            if not frame_id.strip("\x00"):
                break
            if version == 2:
                length = int.from_bytes(body[pos + 3 : pos + 6], "big")
            elif version == 4:
                length = _synchsafe(body[pos + 4 : pos + 8])
            else:
                length = int.from_bytes(body[pos + 4 : pos + 8], "big")
            payload = body[pos + header : pos + header + length]
            if frame_id.startswith("T") and payload:
                frames[frame_id] = _decode_text(payload)
            pos += header + length
    tags = {key: frames[f] for key, ids in _ID3_FRAMES.items() for f in ids if f in frames}
    if not tags and len(data) >= 128 and data[-128:-125] == b"TAG":
        trailer = data[-128:]
        fields = {"title": trailer[3:33], "artist": trailer[33:63], "album": trailer[63:93], "year": trailer[93:97]}
        tags = {k: v.split(b"\x00")[0].decode("latin-1").strip() for k, v in fields.items()}
    return tags


def _synchsafe(raw: bytes) -> int:
    value = 0
    for byte in raw:
        value = (value << 7) | (byte & 0x7F)
    return value


def _decode_text(payload: bytes) -> str:
    encoding, raw = payload[0], payload[1:]
    codec = {0: "latin-1", 1: "utf-16", 2: "utf-16-be", 3: "utf-8"}.get(encoding, "latin-1")
    return raw.decode(codec, "replace").split("\x00")[0].strip()


def check_mp3_meta(result: Any, expected: Any = None, **_: Any) -> float:
    """1 iff every tag named in the rules (title, artist, album, year, genre) matches its `{method, ref}`."""
    tags = read_id3(result)
    if tags is None or not isinstance(expected, Mapping):
        return 0.0
    return score(all(key in tags and match_rule(tags[key], rule) for key, rule in expected.items()))


METRICS = {
    "check_qt_max_volume": check_qt_max_volume,
    "check_qt_minimal_view": check_qt_minimal_view,
    "check_qt_bgcone": check_qt_bgcone,
    "check_one_instance_when_started_from_file": check_one_instance_when_started_from_file,
    "check_global_key_play_pause": check_global_key_play_pause,
    "check_qt_slider_colours": check_qt_slider_colours,
    "is_vlc_recordings_folder": is_vlc_recordings_folder,
    "is_vlc_playing": is_vlc_playing,
    "is_vlc_fullscreen": is_vlc_fullscreen,
    "is_utc_0": is_utc_0,
    "check_text_enlarged": check_text_enlarged,
    "check_gnome_favorite_apps": check_gnome_favorite_apps,
    "check_moved_jpgs": check_moved_jpgs,
    "check_mp3_meta": check_mp3_meta,
}
