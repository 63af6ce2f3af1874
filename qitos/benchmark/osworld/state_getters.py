"""Getters that read application state from the desktop through the provider's `read_file`/`run_command`:
Chrome profile files, the Chrome DevTools target list, GIMP/VLC config files, desktop shortcuts, folders.

Chrome's live tabs come from the DevTools HTTP endpoint (`/json` on port 1337, which the tasks open with
`--remote-debugging-port=1337`), read from inside the VM. Its page list is most-recently-used first, so the
first page is taken as the active tab; `goto_prefix` (used upstream to complete address-bar text) is not
needed because DevTools reports full URLs. Getters that need a scripted browser (HTML parsing of the live
page, visiting a website) are not implemented and surface as unsupported getters.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, urlparse

from .errors import UnsupportedGetter
from .getters import Getter, GetterContext
from .tasks import GetterConfig

CHROME_DIR = ".config/google-chrome"
DEVTOOLS_URL = "http://localhost:1337/json"


def _read(ctx: GetterContext, path: str) -> bytes | None:
    return ctx.need_provider("file").read_file(path)


def _json_file(ctx: GetterContext, relative: str) -> Any:
    data = _read(ctx, f"{ctx.home}/{relative}")
    return json.loads(data.decode("utf-8", "replace")) if data is not None else None


def _prefs(ctx: GetterContext) -> dict[str, Any]:
    return _json_file(ctx, f"{CHROME_DIR}/Default/Preferences") or {}


def _dig(data: Any, *keys: str, default: Any = None) -> Any:
    for key in keys:
        if not isinstance(data, Mapping) or key not in data:
            return default
        data = data[key]
    return data


def _bool_text(value: Any) -> str:
    return "true" if value else "false"


def _default_search_engine(config: GetterConfig, ctx: GetterContext) -> Any:
    return _dig(_prefs(ctx), "default_search_provider_data", "template_url_data", "short_name", default="Google")


def _profile_name(config: GetterConfig, ctx: GetterContext) -> Any:
    return _dig(_prefs(ctx), "profile", "name")


def _chrome_font_size(config: GetterConfig, ctx: GetterContext) -> Any:
    prefs = _dig(_prefs(ctx), "webkit", "webprefs", default={})
    defaults = {"default_font_size": 16, "default_fixed_font_size": 13, "minimum_font_size": 0}
    return {key: prefs.get(key, value) for key, value in defaults.items()}


def _enable_do_not_track(config: GetterConfig, ctx: GetterContext) -> Any:
    return _bool_text(_prefs(ctx).get("enable_do_not_track", False))


def _enhanced_safe_browsing(config: GetterConfig, ctx: GetterContext) -> Any:
    return _bool_text(_dig(_prefs(ctx), "safebrowsing", "enhanced", default=False))


def _new_startup_page(config: GetterConfig, ctx: GetterContext) -> Any:
    """"true" when Chrome opens the New Tab page at start: restore_on_startup 5 (or unset), or 4 with no URLs."""
    session = _prefs(ctx).get("session", {})
    mode = session.get("restore_on_startup", 5)
    return _bool_text(mode == 5 or (mode == 4 and not session.get("startup_urls")))


def _data_delete_automatically(config: GetterConfig, ctx: GetterContext) -> Any:
    """"true" when cookies and site data are cleared on exit (content setting `cookies` = 4, session only)."""
    return _bool_text(_dig(_prefs(ctx), "profile", "default_content_setting_values", "cookies") == 4)


def _bookmarks(config: GetterConfig, ctx: GetterContext) -> Any:
    data = _json_file(ctx, f"{CHROME_DIR}/Default/Bookmarks")
    return data.get("roots") if isinstance(data, Mapping) else None


def _copy(ctx: GetterContext, candidates: list[str], dest: str) -> Any:
    for relative in candidates:
        data = _read(ctx, f"{ctx.home}/{relative}")
        if data is not None:
            return str(ctx.save(dest, data))
    return None


def _history(config: GetterConfig, ctx: GetterContext) -> Any:
    return _copy(ctx, [f"{CHROME_DIR}/Default/History"], str(config.get("dest", "History")))


def _cookie_data(config: GetterConfig, ctx: GetterContext) -> Any:
    candidates = [f"{CHROME_DIR}/Default/Cookies", f"{CHROME_DIR}/Default/Network/Cookies"]
    return _copy(ctx, candidates, str(config.get("dest", "Cookies")))


def _enabled_experiments(config: GetterConfig, ctx: GetterContext) -> Any:
    state = _json_file(ctx, f"{CHROME_DIR}/Local State") or {}
    return list(_dig(state, "browser", "enabled_labs_experiments", default=[]))


def _extension_settings(ctx: GetterContext) -> list[Mapping[str, Any]]:
    found: list[Mapping[str, Any]] = []
    for name in ("Preferences", "Secure Preferences"):
        data = _json_file(ctx, f"{CHROME_DIR}/Default/{name}") or {}
        found.extend(v for v in _dig(data, "extensions", "settings", default={}).values() if isinstance(v, Mapping))
    return found


def _unpacked_extension_paths(config: GetterConfig, ctx: GetterContext) -> Any:
    return [str(s["path"]) for s in _extension_settings(ctx) if s.get("location") == 4 and "path" in s]


def _installed_extension_names(config: GetterConfig, ctx: GetterContext) -> Any:
    names = [_dig(s, "manifest", "name") for s in _extension_settings(ctx)]
    return sorted({n for n in names if isinstance(n, str)})


def _devtools_pages(ctx: GetterContext) -> list[dict[str, Any]]:
    script = f"import urllib.request;print(urllib.request.urlopen({DEVTOOLS_URL!r}, timeout=10).read().decode())"
    result = ctx.need_provider("devtools").run_command(["python3", "-c", script])
    try:
        targets = json.loads(result.output or "[]")
    except json.JSONDecodeError:
        return []
    return [{"title": t.get("title", ""), "url": t.get("url", "")} for t in targets if t.get("type") == "page"]


def _open_tabs_info(config: GetterConfig, ctx: GetterContext) -> Any:
    return _devtools_pages(ctx)


def _active_tab_info(config: GetterConfig, ctx: GetterContext) -> Any:
    pages = _devtools_pages(ctx)
    return pages[0] if pages else None


def _active_url(config: GetterConfig, ctx: GetterContext) -> Any:
    tab = _active_tab_info(config, ctx)
    return tab["url"] if tab else None


def _active_tab_url_parse(config: GetterConfig, ctx: GetterContext) -> Any:
    """Query parameters `parse_keys` of the active URL (first value each), renamed through `replace`."""
    url = _active_url(config, ctx)
    if url is None:
        return None
    query = parse_qs(urlparse(url).query)
    renames = config.get("replace") or {}
    return {renames.get(k, k): query[k][0] for k in config.get("parse_keys", []) if k in query}


def _url_dash_part(config: GetterConfig, ctx: GetterContext) -> Any:
    """Path segment `partIndex` of the active URL; `needDeleteId` drops its query; `returnType` json wraps
    it as `{key: part}`."""
    url = _active_url(config, ctx)
    if url is None:
        return None
    parts = url.split("/")
    index = int(config.get("partIndex", -1))
    if not -len(parts) <= index < len(parts):
        return None
    part = parts[index]
    if config.get("needDeleteId"):
        part = part.split("?", 1)[0]
    return {str(config.get("key")): part} if config.get("returnType") == "json" else part


def _gimp_config_file(config: GetterConfig, ctx: GetterContext) -> Any:
    return _copy(ctx, [f".config/GIMP/2.10/{config.get('file_name')}"], str(config.get("dest", config.get("file_name"))))


def _vlc_config(config: GetterConfig, ctx: GetterContext) -> Any:
    return _copy(ctx, [".config/vlc/vlcrc"], str(config.get("dest", "vlcrc")))


def _list_directory(config: GetterConfig, ctx: GetterContext) -> Any:
    result = ctx.need_provider(config.type).run_command(["ls", "-A1", str(config.get("path"))])
    return None if result.returncode not in (0, None) else [n for n in (result.output or "").splitlines() if n]


def _shortcuts_on_desktop(config: GetterConfig, ctx: GetterContext) -> Any:
    provider = ctx.need_provider(config.type)
    listing = provider.run_command(f"ls -A1 {shlex.quote(ctx.home + '/Desktop')}", shell=True)
    shortcuts = {}
    for name in (listing.output or "").splitlines():
        if name.endswith(".desktop"):
            data = provider.read_file(f"{ctx.home}/Desktop/{name}")
            if data is not None:
                shortcuts[name] = data.decode("utf-8", "replace")
    return shortcuts


def _default_video_player(config: GetterConfig, ctx: GetterContext) -> Any:
    return ctx.need_provider(config.type).run_command(["xdg-mime", "query", "default", "video/mp4"]).output


def _content_from_vm_file(config: GetterConfig, ctx: GetterContext) -> Any:
    """`file_type` xlsx, `file_content` last_row: the cell values of the first sheet's last row."""
    if config.get("file_type") != "xlsx" or config.get("file_content") != "last_row":
        raise UnsupportedGetter("content_from_vm_file supports only file_type xlsx with file_content last_row")
    data = _read(ctx, str(config.get("path")))
    if data is None:
        return None
    import openpyxl

    path = ctx.save("content_from_vm_file.xlsx", data)
    sheet = openpyxl.load_workbook(path, data_only=True).worksheets[0]
    rows = list(sheet.iter_rows(values_only=True))
    return [v for v in rows[-1] if v is not None] if rows else []


VLC_STATUS_URL = "http://localhost:8080/requests/status.xml"
VLC_HTTP_PASSWORD = "password"


def _vlc_playing_info(config: GetterConfig, ctx: GetterContext) -> Any:
    """VLC's HTTP-interface status.xml, fetched inside the VM (the OSWorld image enables the interface on
    port 8080 with password `password`); saved to the cache, its path is returned."""
    script = (
        "import base64,urllib.request as u;"
        f"r=u.Request({VLC_STATUS_URL!r},headers={{'Authorization':'Basic '+base64.b64encode(b':{VLC_HTTP_PASSWORD}').decode()}});"
        "print(u.urlopen(r,timeout=10).read().decode())"
    )
    result = ctx.need_provider(config.type).run_command(["python3", "-c", script])
    if not result.ok or not (result.output or "").strip():
        return None
    return str(ctx.save(str(config.get("dest", "status.xml")), result.output.encode()))


def _background_image_in_slide(config: GetterConfig, ctx: GetterContext) -> Any:
    """The picture filling slide `slide_index`'s background in a deck on the desktop, saved as `dest`."""
    data = _read(ctx, str(config.get("ppt_file_path")))
    if data is None:
        return None
    from pptx import Presentation

    deck = ctx.save("background_image_in_slide.pptx", data)
    slides = Presentation(str(deck)).slides
    index = int(config.get("slide_index", 0))
    if not 0 <= index < len(slides):
        return None
    slide = slides[index]
    namespace = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
    relation = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed"
    for bg in slide._element.iter("{http://schemas.openxmlformats.org/presentationml/2006/main}bg"):
        for blip in bg.iter(f"{namespace}blip"):
            part = slide.part.related_part(blip.get(relation))
            return str(ctx.save(str(config.get("dest", "background.png")), part.blob))
    return None


STATE_GETTERS: dict[str, Getter] = {
    "default_search_engine": _default_search_engine,
    "profile_name": _profile_name,
    "chrome_font_size": _chrome_font_size,
    "enable_do_not_track": _enable_do_not_track,
    "enable_enhanced_safety_browsing": _enhanced_safe_browsing,
    "new_startup_page": _new_startup_page,
    "data_delete_automacally": _data_delete_automatically,
    "bookmarks": _bookmarks,
    "history": _history,
    "cookie_data": _cookie_data,
    "enabled_experiments": _enabled_experiments,
    "find_unpacked_extension_path": _unpacked_extension_paths,
    "find_installed_extension_name": _installed_extension_names,
    "open_tabs_info": _open_tabs_info,
    "active_tab_info": _active_tab_info,
    "active_url_from_accessTree": _active_url,
    "active_tab_url_parse": _active_tab_url_parse,
    "url_dashPart": _url_dash_part,
    "gimp_config_file": _gimp_config_file,
    "vlc_config": _vlc_config,
    "list_directory": _list_directory,
    "shortcuts_on_desktop": _shortcuts_on_desktop,
    "default_video_player": _default_video_player,
    "content_from_vm_file": _content_from_vm_file,
    "vlc_playing_info": _vlc_playing_info,
    "background_image_in_slide": _background_image_in_slide,
}
