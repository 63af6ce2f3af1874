"""General, browser-state, application-profile and system metrics on values and generated files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from osworld_testfiles import write_id3_mp3

from qitos.benchmark.osworld.metrics import METRICS


def run(name: str, result, expected=None, **options) -> float:
    metric = METRICS[name]
    return metric(result, expected, **options) if expected is not None else metric(result, **options)


@pytest.fixture
def write(tmp_path: Path):
    def _write(name: str, content: str | bytes) -> str:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return str(path)

    return _write


# ------------------------------------------------------------- values (no files)

VALUE_CASES = [
    ("exact_match", "Bing", {"expected": "Bing"}, {}, 1.0),
    ("exact_match", "Google", {"expected": "Bing"}, {}, 0.0),
    ("literal_match", ["A", "b"], {"expected": ["a", "B"]}, {"type": "list", "ignore_case": True}, 1.0),
    ("literal_match", ["A", "b"], {"expected": ["a", "B"]}, {"type": "list"}, 0.0),
    ("is_in_list", ["/a", "/home/user/ext"], {"expected": "/home/user/ext"}, {}, 1.0),
    ("is_in_list", ["/a"], {"expected": "/home/user/ext"}, {}, 0.0),
    ("check_include_exclude", "ok: done\n", {"include": ["done"], "exclude": ["fail"]}, {}, 1.0),
    ("check_include_exclude", "done but fail", {"include": ["done"], "exclude": ["fail"]}, {}, 0.0),
    ("check_direct_json_object", {"a": "x  y", "b": 2}, {"expected": {"a": "x y", "b": 2.0}}, {}, 1.0),
    ("check_direct_json_object", "{'a': 'z'}", {"expected": {"a": "x"}}, {}, 0.0),
    ("check_direct_json_object", '{"h": "Mount Everest"}', {"expected": {"h": ["Everest", "K2"]}, "expect_in_result": True}, {}, 1.0),
    ("check_direct_json_object", {"h": "Fuji"}, {"expected": {"h": ["Everest"]}, "expect_in_result": True}, {}, 0.0),
    ("is_in_vm_clickboard", {"expected": "/home/user/a.docx"}, "/home/user/a.docx", {}, 1.0),
    ("is_in_vm_clickboard", {"expected": "/home/user/a.docx"}, "/tmp/b", {}, 0.0),
    # browser state
    ("is_expected_active_tab", {"url": "https://www.drugs.com/npc/"}, {"type": "url", "url": "https://www.drugs.com/npc"}, {}, 1.0),
    ("is_expected_active_tab", "https://www.drugs.com/npp/", {"type": "url", "url": "https://www.drugs.com/npc/"}, {}, 0.0),
    ("is_expected_url_pattern_match", {"url": "https://x.com/s?search=spider-man%20toys&S=4"}, {"expected": ["search=spider[-%20]?man", "S=4"]}, {}, 1.0),
    ("is_expected_url_pattern_match", "https://x.com/s?S=3", {"expected": ["S=4"]}, {}, 0.0),
    ("is_expected_tabs", [{"url": "https://a.com/"}, {"url": "https://b.com"}], {"type": "url", "urls": ["https://a.com", "https://b.com/"]}, {}, 1.0),
    ("is_expected_tabs", [{"url": "https://b.com"}, {"url": "https://a.com"}], {"type": "url", "urls": ["https://a.com", "https://b.com"]}, {}, 0.0),
    ("is_expected_search_query", {"url": "https://www.google.com/search?q=Nereida&x=1"}, {"expect": {"pattern": r"www\.google\.com.*?/search\?q=Nereida&"}}, {}, 1.0),
    ("is_expected_search_query", {"url": "https://www.bing.com/search?q=Nereida&"}, {"expect": {"pattern": r"www\.google\.com"}}, {}, 0.0),
    ("is_extension_installed", "ms-python.python\n", {"type": "contain", "expected": "ms-python.python"}, {}, 1.0),
    ("is_extension_installed", "", {"type": "contain", "expected": "ms-python.python"}, {}, 0.0),
    ("is_expected_installed_extensions", ["Momentum", "Zoom", "X"], {"expected": ["Zoom", "Momentum"]}, {}, 1.0),
    ("is_expected_installed_extensions", ["Momentum"], {"expected": ["Zoom", "Momentum"]}, {}, 0.0),
    ("check_font_size", {"default_font_size": 20}, {"type": "range", "min": 16, "max": 99999}, {}, 1.0),
    ("check_font_size", {"default_font_size": 12}, {"type": "range", "min": 16, "max": 99999}, {}, 0.0),
    ("check_enabled_experiments", ["chrome-refresh-2023@2", "chrome-webui-refresh-2023@2"], {"type": "names", "names": ["chrome-refresh-2023", "chrome-webui-refresh-2023"]}, {}, 1.0),
    ("check_enabled_experiments", ["chrome-refresh-2023@2"], {"type": "names", "names": ["chrome-refresh-2023", "chrome-webui-refresh-2023"]}, {}, 0.0),
    ("is_shortcut_on_desktop", {"game.desktop": "[Desktop Entry]\nName=Play Puzzle Game 2048\n"}, {"type": "name", "name": "Play Puzzle Game 2048"}, {}, 1.0),
    ("is_shortcut_on_desktop", {"x.desktop": "Name=Other\n"}, {"type": "name", "name": "Play Puzzle Game 2048"}, {}, 0.0),
    ("is_added_to_steam_cart", {"content": "<div>The Dota 2 Official Soundtrack</div>"}, {"items": ["The Dota 2 Official Soundtrack"]}, {}, 1.0),
    ("is_added_to_steam_cart", {"content": "<div>empty cart</div>"}, {"items": ["The Dota 2 Official Soundtrack"]}, {}, 0.0),
    # system
    ("is_utc_0", "               Time zone: Etc/UTC (UTC, +0000)\n", None, {}, 1.0),
    ("is_utc_0", "               Time zone: Asia/Tokyo (JST, +0900)\n", None, {}, 0.0),
    ("check_text_enlarged", "1.25\n", None, {}, 1.0),
    ("check_text_enlarged", "1.0\n", None, {}, 0.0),
    ("check_gnome_favorite_apps", "['google-chrome.desktop', 'thunderbird.desktop']\n", {"expected": ["thunderbird.desktop", "google-chrome.desktop"]}, {}, 1.0),
    ("check_gnome_favorite_apps", "['google-chrome.desktop']\n", {"expected": ["thunderbird.desktop", "google-chrome.desktop"]}, {}, 0.0),
    ("check_moved_jpgs", ["a.jpg", "b.jpg"], {"expected": ["b.jpg", "a.jpg"]}, {}, 1.0),
    ("check_moved_jpgs", {"children": [{"name": "a.jpg"}]}, {"expected": ["b.jpg", "a.jpg"]}, {}, 0.0),
    ("is_vlc_fullscreen", {"width": 1920, "height": 1080}, {"width": 1920, "height": 1080}, {}, 1.0),
    ("is_vlc_fullscreen", {"width": 1920, "height": 1080}, {"width": 800, "height": 600}, {}, 0.0),
]


@pytest.mark.parametrize(("name", "result", "expected", "options", "want"), VALUE_CASES)
def test_value_metrics(name: str, result, expected, options, want: float) -> None:
    assert run(name, result, expected, **options) == want


def test_fuzzy_match_is_graded() -> None:
    assert run("fuzzy_match", "hello", {"expected": "hello"}) == 1.0
    assert 0.0 < run("fuzzy_match", "hallo", {"expected": "hello"}) < 1.0


@pytest.mark.parametrize("name", sorted(METRICS))
def test_missing_result_scores_zero(name: str) -> None:
    assert METRICS[name](None, None) == 0.0


# ------------------------------------------------------------- text, JSON, CSV files


def test_text_file_metrics(write) -> None:
    a, b = write("a.txt", "Hello  world\n"), write("b.txt", "hello world")
    assert run("compare_text_file", a, b) == 0.0
    assert run("compare_text_file", a, b, ignore_blanks=True, ignore_case=True) == 1.0
    assert run("diff_text_file", a, a) == 1.0
    assert 0.0 <= run("diff_text_file", a, write("c.txt", "other\nlines\n")) < 1.0
    assert run("compare_config", write("s.json", '{"k": 1}\n'), {"expected": '{"k": 1}\n'}) == 1.0
    assert run("compare_config", write("s2.json", '{"k": 2}\n'), {"expected": '{"k": 1}\n'}) == 0.0
    report = write("r.txt", "CPU %user %nice %system %iowait %steal %idle\n")
    assert run("file_contains", report, {"expected": ["CPU", "%idle"]}) == 1.0
    assert run("file_contains", report, {"expected": ["MEM"]}) == 0.0


def test_check_line_number(write) -> None:
    lines = ["Linux 6.2 (host)", "", "10:00:00 AM CPU %user"] + [f"10:00:{i:02d} AM all 1.0" for i in range(1, 31)]
    sar = write("sar.txt", "\n".join(lines + ["Average: all 1.0"]))
    assert run("check_line_number", sar, {"expected": "31"}) == 1.0
    assert run("check_line_number", sar, {"expected": "30"}) == 0.0


def test_check_list(write) -> None:
    path = write("apt.out", "ii  openjdk-17-jre  17.0\nii  vim\n")
    assert run("check_list", path, {"expect": [r"openjdk-\d+-(jre|jdk)"]}) == 1.0
    assert run("check_list", path, {"expect": ["emacs"]}) == 0.0
    assert run("check_list", write("diff.out", ""), {"unexpect": [".+"]}) == 1.0
    assert run("check_list", path, {"unexpect": [".+"]}) == 0.0


def test_json_settings_and_keybindings(write) -> None:
    settings = write("settings.json", '{\n // comment\n "files.exclude": {"**/__pycache__": true, "**/.git": true},\n "editor.wordWrapColumn": 50,\n}')
    assert run("check_json_settings", settings, {"expected": {"files.exclude": {"**/__pycache__": True}}}) == 1.0
    assert run("check_json_settings", settings, {"expected": {"editor.wordWrapColumn": 80}}) == 0.0
    keys = write("keybindings.json", json.dumps([{"key": "ctrl+j", "command": "workbench.action.focusActiveEditorGroup", "when": "terminalFocus"}]))
    good = {"expected": {"key": "ctrl+j", "command": "workbench.action.focusActiveEditorGroup", "when": "terminalFocus"}}
    assert run("check_json_keybindings", keys, good) == 1.0
    assert run("check_json_keybindings", keys, {"expected": {"key": "ctrl+k", "command": "x"}}) == 0.0


def test_check_json(write) -> None:
    manifest = write("manifest.json", json.dumps({"name": "happy-extension", "background": {"scripts": ["bg.js"]}, "mode": "smart folders"}))
    rules = {"expect": [{"key": ["name"], "method": "eq", "ref": "happy-extension"},
                        {"key": ["background", "scripts"], "method": "eq", "ref": ["bg.js"]},
                        {"key": ["mode"], "method": "re", "ref": r"\bsmart\b"}]}
    assert run("check_json", manifest, rules) == 1.0
    assert run("check_json", manifest, {"expect": [{"key": ["version"], "method": "eq", "ref": "0.0.1"}]}) == 0.0
    assert run("check_json", manifest, {"unexpect": [{"key": ["name"], "method": "eq", "ref": "happy-extension"}]}) == 0.0


def test_csv_metrics(write) -> None:
    accounts = write("accounts.csv", "url,user,password\nimap://outlook.office365.com,anon@outlook.com,pw\n")
    assert run("check_csv", accounts, {"expect": [{"url": "imap://outlook.office365.com", "user": "anon@outlook.com"}]}) == 1.0
    assert run("check_csv", accounts, {"unexpect": [{"url": "imap://outlook.office365.com"}]}) == 0.0
    a, b = write("a.csv", "x,y\n1,2\n"), write("b.csv", "x, y\n1,2\n\n")
    assert run("compare_csv", a, b) == 1.0
    assert run("compare_csv", a, write("c.csv", "x,y\n1,3\n")) == 0.0


def test_python_and_result_files(write) -> None:
    a = write("a.py", "x = 1  # comment\n\n\ndef f():\n    return x\n")
    assert run("compare_python_pure_text", a, write("b.py", "x=1\ndef f():\n    return x\n")) == 1.0
    assert run("compare_python_pure_text", a, write("c.py", "x = 2\n")) == 0.0
    assert run("compare_result_files", write("r.txt", "3.50\n"), write("g.txt", "3.5")) == 1.0
    assert run("compare_result_files", write("r2.txt", "4\n"), write("g2.txt", "3.5")) == 0.0


# ------------------------------------------------------------- application profiles


def test_thunderbird_prefs(write) -> None:
    prefs = write("prefs.js", 'user_pref("mail.identity.id1.auto_quote", false);\n'
                              'user_pref("mail.identity.id1.htmlSigText", "Anonym\\nXYZ Lab");\n')
    assert run("check_thunderbird_prefs", prefs, {"expect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}}) == 1.0
    assert run("check_thunderbird_prefs", prefs, {"expect": {"mail.identity.id1.htmlSigText": {"method": "re.S", "ref": "Anonym.+XYZ Lab"}}}) == 1.0
    assert run("check_thunderbird_prefs", prefs, {"expect": {"mail.other": {"method": "eq", "ref": True}}}) == 0.0
    assert run("check_thunderbird_prefs", prefs, {"unexpect": {"mail.identity.id1.auto_quote": {"method": "eq", "ref": False}}}) == 0.0


def test_thunderbird_filter(write) -> None:
    rules = write("msgFilterRules.dat", 'version="9"\nlogging="no"\nname="discount"\nenabled="yes"\ntype="17"\n'
                                         'action="Move to folder"\nactionValue="mailbox://nobody@Local%20Folders/Promotions"\n'
                                         'condition="AND (subject,contains,discount)"\n')
    want = {"enabled": "yes", "action": "Move to folder", "actionValue": "mailbox://nobody@Local%20Folders/Promotions",
            "condition": ["AND (subject,contains,discount)"]}
    assert run("check_thunderbird_filter", rules, {"expect": [want]}) == 1.0
    assert run("check_thunderbird_filter", rules, {"expect": [{**want, "action": "Forward"}]}) == 0.0


def _mbox(*messages: tuple[str, str, str]) -> str:
    return "".join(f"From - Mon Jan 01 00:00:00 2024\nX-Mozilla-Status: {status}\nMessage-ID: <{mid}>\nSubject: {subject}\n\nbody\n\n"
                   for mid, subject, status in messages)


def test_thunderbird_folder(write) -> None:
    gold = write("gold", _mbox(("1@x", "Bill", "0001"), ("2@x", "Invoice", "0001")))
    same = write("have", _mbox(("2@x", "Invoice", "0001"), ("1@x", "Bill", "0001"), ("3@x", "Old", "0009"), ("1@x", "Bill", "0001")))
    assert run("check_thunderbird_folder", [same], [gold]) == 1.0
    assert run("check_thunderbird_folder", same, gold, remove_deleted=False) == 0.0
    assert run("check_thunderbird_folder", write("few", _mbox(("1@x", "Bill", "0001"))), gold) == 0.0


def test_gimp_config_status(write) -> None:
    gimprc = write("gimprc", '(undo-levels 100)\n(theme "Light")\n(history-item "filters-vignette" 1)\n')
    assert run("check_config_status", gimprc, {"type:": "key-value", "key": "theme", "value": '"Light"'}) == 1.0
    assert run("check_config_status", gimprc, {"key": ["history-item", '"filters-vignette"'], "value": "1"}) == 1.0
    assert run("check_config_status", gimprc, {"key": "undo-levels", "value": "5"}) == 0.0


def _xcu(items: list[tuple[str, str, str]]) -> str:
    body = "".join(f'<item oor:path="{p}"><prop oor:name="{n}" oor:op="fuse"><value>{v}</value></prop></item>' for p, n, v in items)
    return f'<?xml version="1.0"?><oor:items xmlns:oor="http://openoffice.org/2001/registry">{body}</oor:items>'


def test_libreoffice_registry_metrics(write) -> None:
    xcu = write("registrymodifications.xcu", _xcu([
        ("/org.openoffice.Office.Recovery/AutoSave", "TimeIntervall", "3"),
        ("/org.openoffice.Office.Writer/DefaultFont", "Standard", "Times New Roman"),
        ("/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen", "false"),
    ]))
    other = write("other.xcu", _xcu([("/org.openoffice.Office.Impress/Misc/Start", "EnablePresenterScreen", "true")]))
    assert run("check_auto_saving_time", xcu, {"minutes": 3}) == 1.0
    assert run("check_auto_saving_time", xcu, {"minutes": 10}) == 0.0
    assert run("find_default_font", xcu, {"font_name": "Times New Roman"}) == 1.0
    assert run("find_default_font", other, {"font_name": "Times New Roman"}) == 0.0
    assert run("check_presenter_console_disable", xcu) == 1.0
    assert run("check_presenter_console_disable", other) == 0.0


def _sqlite(path: Path, schema: str, rows: list[tuple], insert: str) -> str:
    with sqlite3.connect(path) as conn:
        conn.execute(schema)
        conn.executemany(insert, rows)
    return str(path)


def test_sqlite_metrics(tmp_path: Path) -> None:
    db = _sqlite(tmp_path / "msgs.sqlite", "CREATE TABLE t (v INTEGER)", [(1,)], "INSERT INTO t VALUES (?)")
    assert run("run_sqlite3", db, {"sql": "select sum(1) > 0 from t where v = 1"}) == 1.0
    assert run("run_sqlite3", db, {"sql": "select sum(1) > 0 from t where v = 2"}) == 0.0
    cookies = _sqlite(tmp_path / "Cookies", "CREATE TABLE cookies (host_key TEXT)", [(".google.com",)], "INSERT INTO cookies VALUES (?)")
    assert run("is_cookie_deleted", cookies, {"type": "domains", "domains": [".amazon.com"]}) == 1.0
    assert run("is_cookie_deleted", cookies, {"type": "domains", "domains": ["google.com"]}) == 0.0
    history = _sqlite(tmp_path / "History", "CREATE TABLE urls (url TEXT, title TEXT)", [("https://www.youtube.com/watch", "YouTube")],
                      "INSERT INTO urls VALUES (?, ?)")
    assert run("check_history_deleted", history, {"type": "keywords", "keywords": ["wikipedia"]}) == 1.0
    assert run("check_history_deleted", history, {"type": "keywords", "keywords": ["youtube"]}) == 0.0


def test_bookmarks() -> None:
    roots = {"bookmark_bar": {"children": [
        {"type": "folder", "name": "Liked Authors", "children": [
            {"type": "url", "url": "https://jimfan.me/"}, {"type": "url", "url": "https://yukezhu.me/"}]},
        {"type": "url", "url": "https://jalammar.github.io/illustrated-transformer/"},
    ]}}
    assert run("is_expected_bookmarks", roots, {"type": "bookmark_bar_folders_names", "names": ["Liked Authors"]}) == 1.0
    assert run("is_expected_bookmarks", roots, {"type": "bookmark_bar_folders_names", "names": ["Favorites"]}) == 0.0
    assert run("is_expected_bookmarks", roots, {"type": "bookmark_bar_websites_urls", "urls": ["https://jalammar.github.io/illustrated-transformer/"]}) == 1.0
    liked = {"type": "liked_authors_websites_urls", "names": ["Liked Authors"],
             "urls": [["https://yukezhu.me/", "https://x.edu"], ["https://research.nvidia.com/jim", "https://jimfan.me/"]]}
    assert run("is_expected_bookmarks", roots, liked) == 1.0
    assert run("is_expected_bookmarks", roots, {**liked, "urls": liked["urls"][:1]}) == 0.0


# ------------------------------------------------------------- VLC and MP3


VLCRC = "[qt]\nqt-max-volume=200\n#qt-bgcone=1\nqt-minimal-view=1\nqt-slider-colours=10;10;10;20;20;20;30;30;30;40;40;40\n" \
        "global-key-play-pause=Ctrl+Space\ninput-record-path=/home/user/Desktop/\none-instance-when-started-from-file=0\n"


@pytest.mark.parametrize(("name", "good", "bad"), [
    ("check_qt_max_volume", {"expected_qt_max_volume": 200}, {"expected_qt_max_volume": 125}),
    ("check_qt_minimal_view", {"expected_qt_minimal_view": 1}, {"expected_qt_minimal_view": 0}),
    ("check_qt_bgcone", {"expected_qt_bgcone": 1}, {"expected_qt_bgcone": 0}),
    ("check_one_instance_when_started_from_file", {"expected_one_instance_when_started_from_file": 0},
     {"expected_one_instance_when_started_from_file": 1}),
    ("check_global_key_play_pause", {"expected_global_key_play_pause": 1}, {"expected_global_key_play_pause": 0}),
    ("check_qt_slider_colours", {"type": "blackish"}, {"type": "whitish"}),
    ("is_vlc_recordings_folder", {"recording_file_path": "/home/user/Desktop"}, {"recording_file_path": "/tmp"}),
])
def test_vlc_config_metrics(write, name: str, good: dict, bad: dict) -> None:
    path = write("vlcrc", VLCRC)
    assert run(name, path, good) == 1.0
    assert run(name, path, bad) == 0.0


def test_vlc_default_slider_colours_are_not_blackish(write) -> None:
    assert run("check_qt_slider_colours", write("vlcrc", "[qt]\n"), {"type": "blackish"}) == 0.0


def test_is_vlc_playing(write) -> None:
    status = write("status.xml", "<root><state>playing</state><information><category name='meta'>"
                                 "<info name='filename'>Rick Astley - Never Gonna Give You Up.mp4</info>"
                                 "<info name='url'>https://www.youtube.com/watch?v=pgBsyTKAwLw</info></category></information></root>")
    assert run("is_vlc_playing", status, {"type": "file_name", "file_name": "Rick Astley - Never Gonna Give You Up.mp4"}) == 1.0
    assert run("is_vlc_playing", status, {"type": "url", "url": "https://www.youtube.com/watch?v=pgBsyTKAwLw"}) == 1.0
    stopped = write("stopped.xml", "<root><state>stopped</state></root>")
    assert run("is_vlc_playing", stopped, {"type": "url", "url": "https://www.youtube.com/watch?v=pgBsyTKAwLw"}) == 0.0


def test_check_mp3_meta(tmp_path: Path) -> None:
    mp3 = str(write_id3_mp3(tmp_path / "song.mp3", "Missing You", "Cheng Xiang"))
    rules = {"title": {"method": "eq", "ref": "Missing You"}, "artist": {"method": "eq", "ref": "Cheng Xiang"}}
    assert run("check_mp3_meta", mp3, rules) == 1.0
    assert run("check_mp3_meta", mp3, {**rules, "artist": {"method": "eq", "ref": "Zhou Xuan"}}) == 0.0
