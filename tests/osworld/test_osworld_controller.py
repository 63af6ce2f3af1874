"""Controller client and ControllerProvider against a fake in-VM controller served over real HTTP."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from osworld_fake_controller import FakeController, png_bytes
from osworld_vm_controller import png

from qitos.benchmark.osworld import (
    Computer13Action,
    ControllerClient,
    ControllerError,
    ControllerProvider,
    ControllerUnreachable,
    HttpDownloader,
    OSWorldTask,
    UnsupportedSetupStep,
    action_command,
    discover_provider,
    evaluate,
    load_tasks,
    readiness,
    run_setup,
)
from tests.support.openai_server import refused_port


@pytest.fixture
def fake():
    with FakeController() as controller:
        yield controller


class FakeDownloader:
    def fetch(self, url: str, dest: Path) -> Path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(f"content of {url}".encode())
        return dest


@pytest.fixture
def provider(fake):
    sleeps: list[float] = []
    p = ControllerProvider(ControllerClient(fake.url, timeout=5), downloader=FakeDownloader(), sleep=sleeps.append)
    p.sleeps = sleeps  # type: ignore[attr-defined]
    yield p
    p.close()


def test_client_routes(fake) -> None:
    fake.files["/home/user/a.txt"] = b"hello"
    fake.command_output = lambda command, shell: "out:" + (command if isinstance(command, str) else " ".join(command))
    with ControllerClient(fake.url) as client:
        assert client.screenshot() == png_bytes()
        assert client.platform() == "Linux"
        assert client.cursor_position() == (10, 20)
        assert client.accessibility_tree() == "<desktop-frame name='main'/>"
        result = client.execute(["ls", "-l"])
        assert (result.status, result.output, result.returncode, result.ok) == ("success", "out:ls -l", 0, True)
        assert fake.calls("/execute")[-1] == {"command": ["ls", "-l"], "shell": False}
        assert client.get_file("/home/user/a.txt") == b"hello"
        assert client.get_file("/home/user/none") is None
        client.upload_file("/home/user/up.bin", b"\x00\x01")
        assert fake.files["/home/user/up.bin"] == b"\x00\x01"
        assert client.screen_size() == {"width": 1920, "height": 1080}
        assert client.window_size("vlc") == {"width": 1920, "height": 1080}
        assert client.terminal_output() == "54\n"
        assert client.wallpaper() == png_bytes((0, 0, 255))
        assert client.list_directory("/d")["children"][0]["name"] == "a.jpg"
        client.launch(["vlc"], shell=False)
        client.open_file("/home/user/a.txt")
        client.activate_window("Calc", strict=True)
        client.close_window("Mail.thunderbird", strict=True, by_class=True)
        client.change_wallpaper("/home/user/w.png")
        client.download_file("https://x/y", "/home/user/y")
    assert fake.calls("/setup/launch") == [{"command": ["vlc"], "shell": False}]
    assert fake.calls("/setup/open_file") == [{"path": "/home/user/a.txt"}]
    assert fake.calls("/setup/activate_window") == [{"window_name": "Calc", "strict": True, "by_class": False}]
    assert fake.calls("/setup/close_window") == [{"window_name": "Mail.thunderbird", "strict": True, "by_class": True}]
    assert fake.calls("/setup/change_wallpaper") == [{"path": "/home/user/w.png"}]
    assert fake.calls("/setup/download_file") == [{"url": "https://x/y", "path": "/home/user/y"}]


def test_client_errors_are_clear(fake) -> None:
    with ControllerClient(f"http://127.0.0.1:{refused_port()}", timeout=2) as client:
        with pytest.raises(ControllerUnreachable, match=r"unreachable.*QITOS_OSWORLD_CONTROLLER"):
            client.screenshot()
    with ControllerClient(fake.url) as client:
        with pytest.raises(ControllerError, match="HTTP 500"):
            client._request("POST", "/setup/fail")
        with pytest.raises(ControllerError, match="HTTP 404"):
            client._request("GET", "/nowhere")
    with pytest.raises(ValueError, match="must start with http"):
        ControllerClient("localhost:5000")


def test_discover_provider_from_environment() -> None:
    assert discover_provider({}) is None
    found = discover_provider({"QITOS_OSWORLD_CONTROLLER": "http://127.0.0.1:5000"})
    assert isinstance(found, ControllerProvider) and found.client.base_url == "http://127.0.0.1:5000"
    found.close()


def step_task(config: list[dict[str, Any]], evaluator: dict[str, Any] | None = None) -> OSWorldTask:
    return OSWorldTask.model_validate({"id": "t", "domain": "os", "snapshot": "os", "instruction": "x", "config": config,
                                       "evaluator": evaluator or {"func": "infeasible"}})


def test_setup_steps_go_to_the_controller(fake, provider, tmp_path: Path) -> None:
    fake.command_output = lambda command, shell: "thunderbird 123\n"
    t = step_task([
        {"type": "download", "parameters": {"files": [{"url": "https://drive/x", "path": "/home/user/x.xlsx"}]}},
        {"type": "launch", "parameters": {"command": ["libreoffice", "--calc", "/home/user/x.xlsx"]}},
        {"type": "execute", "parameters": {"command": "ps -eF", "shell": True, "stdout": "thunderbird.ps"}},
        {"type": "command", "parameters": {"command": ["true"]}},
        {"type": "open", "parameters": {"path": "/home/user/x.xlsx"}},
        {"type": "activate_window", "parameters": {"window_name": "x.xlsx - LibreOffice Calc", "strict": True}},
        {"type": "close_window", "parameters": {"window_name": "Dialog"}},
        {"type": "sleep", "parameters": {"seconds": 0.5}},
    ])
    run_setup(t, provider, tmp_path)
    assert fake.files["/home/user/x.xlsx"] == b"content of https://drive/x"
    assert fake.calls("/setup/launch") == [
        {"command": ["libreoffice", "--calc", "/home/user/x.xlsx"], "shell": False},
    ]
    assert fake.calls("/setup/execute") == [{"command": "ps -eF", "shell": True}, {"command": ["true"], "shell": False}]
    assert (tmp_path / "thunderbird.ps").read_text() == "thunderbird 123\n"
    assert fake.calls("/setup/activate_window")[0]["strict"] is True
    assert provider.sleeps == [0.5]


def test_unsupported_steps_and_readiness(provider, osworld_data: Path) -> None:
    t = step_task([{"type": "googledrive", "parameters": {"settings_file": "s.yml", "operation": ["delete"], "args": [{}]}}])
    with pytest.raises(UnsupportedSetupStep, match="googledrive"):
        provider.run_step(t.config[0], Path("."))
    assert readiness(t, provider).status == "requires_unavailable"
    assert "credentials" in (readiness(t, provider).reason or "")
    tasks = load_tasks(osworld_data)
    statuses = {readiness(task, provider).status for task in tasks}
    assert statuses == {"ready", "requires_unavailable", "unsupported"}
    ready = sum(readiness(task, provider).status == "ready" for task in tasks)
    assert ready >= 0.6 * len(tasks)


@pytest.mark.parametrize(("action", "code"), [
    ({"action_type": "CLICK", "parameters": {"x": 5, "y": 6, "button": "right", "num_clicks": 2}},
     "pyautogui.click(x=5, y=6, button='right', clicks=2)"),
    ({"action_type": "MOVE_TO", "parameters": {"x": 1, "y": 2}}, "pyautogui.moveTo(1, 2, duration=0.5)"),
    ({"action_type": "TYPING", "parameters": {"text": "it's \"quoted\"\n"}}, "pyautogui.typewrite('it\\'s \"quoted\"\\n')"),
    ({"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "s"]}}, "pyautogui.hotkey('ctrl', 's')"),
    ({"action_type": "SCROLL", "parameters": {"dy": -3}}, "pyautogui.vscroll(-3)"),
    ({"action_type": "DRAG_TO", "parameters": {"x": 9, "y": 8}}, "pyautogui.dragTo(9, 8, duration=1.0, button='left', mouseDownUp=True)"),
    ({"action_type": "PRESS", "parameters": {"key": "enter"}}, "pyautogui.press('enter')"),
    ({"action_type": "RIGHT_CLICK", "parameters": {}}, "pyautogui.rightClick()"),
])
def test_computer13_actions_become_pyautogui(action: dict, code: str) -> None:
    command = action_command(Computer13Action.model_validate(action))
    assert command is not None and command[:2] == ["python", "-c"]
    assert command[2].endswith(code)
    compile(command[2], "<action>", "exec")


@pytest.mark.parametrize("bad", [
    {"action_type": "CLICK", "parameters": {"x": 1}},
    {"action_type": "TYPING", "parameters": {}},
    {"action_type": "HOTKEY", "parameters": {"keys": []}},
    {"action_type": "JUMP", "parameters": {}},
    {"action_type": "CLICK", "parameters": {"button": "side"}},
])
def test_invalid_actions_are_rejected(bad: dict) -> None:
    with pytest.raises(ValueError):
        Computer13Action.model_validate(bad)


def test_actions_run_through_execute(fake, provider) -> None:
    provider.execute_action({"action_type": "CLICK", "parameters": {"x": 5, "y": 6}})
    provider.execute_action("pyautogui.press('tab')")
    assert provider.execute_action("DONE") is None and provider.execute_action({"action_type": "FAIL", "parameters": {}}) is None
    assert provider.execute_action("WAIT") is None and provider.sleeps == [1.0]
    sent = [c["command"][2] for c in fake.calls("/execute")]
    assert sent[0].endswith("pyautogui.click(x=5, y=6, button='left', clicks=1)")
    assert sent[1].endswith("pyautogui.press('tab')")
    assert provider.screenshot() == png_bytes()


def test_upstream_getters_through_the_controller(upstream, vm) -> None:
    """Files found through python commands in the VM, screen/window sizes, terminal output, directory trees."""
    controller, provider = vm
    controller.place("/home/user/.config/google-chrome/Default/Preferences", json.dumps({
        "profile": {"name": "Thomas"}, "enable_do_not_track": True}).encode())
    controller.place("/home/user/.config/vlc/vlcrc", b"[qt]\nqt-max-volume=200\n")
    controller.place("/home/user/Pictures/a.jpg", b"jpg")
    controller.terminal = "make: done\n"

    def score(evaluator: dict[str, Any]) -> float | None:
        outcome = evaluate(step_task([], evaluator), upstream, provider, "DONE")
        assert outcome.status == "scored", outcome.reason
        return outcome.score

    rule = {"type": "rule", "rules": {"expected": "Thomas"}}
    assert score({"func": "exact_match", "result": {"type": "profile_name"}, "expected": rule}) == 1.0
    assert score({"func": "exact_match", "result": {"type": "enable_do_not_track"},
                  "expected": {"type": "rule", "rules": {"expected": "true"}}}) == 1.0
    assert score({"func": "check_qt_max_volume", "result": {"type": "vlc_config", "dest": "vlcrc"},
                  "expected": {"type": "rule", "rules": {"expected_qt_max_volume": 200}}}) == 1.0
    assert score({"func": "is_vlc_fullscreen", "result": {"type": "vm_window_size", "app_class_name": "vlc"},
                  "expected": {"type": "vm_screen_size"}}) == 1.0
    assert score({"func": "check_include_exclude", "result": {"type": "vm_terminal_output"},
                  "expected": {"type": "rule", "rules": {"include": ["done"], "exclude": ["error"]}}}) == 1.0
    assert score({"func": "check_direct_json_object", "result": {"type": "list_directory", "path": "/home/user/Pictures"},
                  "expected": {"type": "rule", "rules": {"expected": {"type": "directory", "name": "Pictures",
                                                                      "children": [{"type": "file", "name": "a.jpg"}]}}}}) == 1.0


def test_unreachable_controller_during_evaluation_is_an_error(upstream) -> None:
    dead = ControllerProvider(ControllerClient(f"http://127.0.0.1:{refused_port()}", timeout=2), downloader=FakeDownloader())
    evaluator = {"func": "exact_match", "result": {"type": "vm_command_line", "command": "ls"},
                 "expected": {"type": "rule", "rules": {"expected": "a"}}}
    outcome = evaluate(step_task([], evaluator), upstream, dead, "DONE")
    assert outcome.status == "error" and "ConnectionError" in (outcome.reason or "")
    dead.close()


def test_slide_background_getter_and_a_gold_file_over_http(upstream, vm, fake, tmp_path: Path) -> None:
    controller, provider = vm
    pptx = pytest.importorskip("pptx")
    from lxml import etree

    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])
    image_part, rel_id = slide.part.get_or_add_image_part(io.BytesIO(png(16, 16, (0, 255, 0))))
    p, a = "http://schemas.openxmlformats.org/presentationml/2006/main", "http://schemas.openxmlformats.org/drawingml/2006/main"
    c_sld = slide._element.find(f"{{{p}}}cSld")
    bg = etree.Element(f"{{{p}}}bg")
    blip_fill = etree.SubElement(etree.SubElement(bg, f"{{{p}}}bgPr"), f"{{{a}}}blipFill")
    etree.SubElement(blip_fill, f"{{{a}}}blip").set("{http://schemas.openxmlformats.org/officeDocument/2006/relationships}embed", rel_id)
    c_sld.insert(0, bg)
    deck_path = tmp_path / "deck.pptx"
    deck.save(deck_path)
    controller.place("/home/user/Desktop/deck.pptx", deck_path.read_bytes())
    fake.files["/download/gold.png"] = png(16, 16, (0, 255, 0))
    background = {"func": "compare_images",
                  "result": {"type": "background_image_in_slide", "ppt_file_path": "/home/user/Desktop/deck.pptx",
                             "slide_index": 0, "dest": "bg.png"},
                  "expected": {"type": "cloud_file", "path": f"{fake.url}/download/gold.png", "dest": "gold.png"}}
    downloader = HttpDownloader(cache_root=tmp_path / "gold-cache")
    outcome = evaluate(step_task([], background), upstream, provider, "DONE", downloader=downloader)
    assert (outcome.status, outcome.score) == ("scored", 1.0), outcome.reason


def test_http_downloader(fake, tmp_path: Path) -> None:
    from qitos.benchmark.osworld import HttpDownloader
    from qitos.benchmark.osworld.errors import DownloadError

    fake.files["/download/input.xlsx"] = b"PK\x03\x04data"
    target = HttpDownloader(timeout=5).fetch(f"{fake.url}/download/input.xlsx", tmp_path / "in" / "input.xlsx")
    assert target.read_bytes() == b"PK\x03\x04data"
    cached = HttpDownloader(timeout=5, cache_root=tmp_path / "cache")
    cached.fetch(f"{fake.url}/download/input.xlsx", tmp_path / "a.xlsx")
    del fake.files["/download/input.xlsx"]  # the second fetch must come from the cache
    assert cached.fetch(f"{fake.url}/download/input.xlsx", tmp_path / "b.xlsx").read_bytes() == b"PK\x03\x04data"
    with pytest.raises(DownloadError, match="could not download"):
        HttpDownloader(timeout=5).fetch(f"{fake.url}/download/missing", tmp_path / "x")


def test_chrome_tabs_through_devtools(upstream, vm, tmp_path: Path) -> None:
    """Upstream's chrome_open_tabs setup and Chrome getters drive a real Chromium over DevTools at the VM's port."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from osworld_chromium import chromium

    from qitos.benchmark.osworld import VMAddress

    class Pages(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802
            body = f"<html><head><title>page {self.path}</title></head><body>{self.path}</body></html>".encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    site = ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{site.server_address[1]}"
    try:
        with chromium(tmp_path, f"{base}/start") as port:
            controller, _ = vm
            address = VMAddress.from_controller_url(controller.url, chromium_port=port)
            provider = ControllerProvider(ControllerClient(controller.url), address=address)
            # upstream's chrome_open_tabs: new tabs in the running browser, its first tab (/start) closed
            run_setup(step_task([{"type": "chrome_open_tabs", "parameters": {"urls_to_open": [f"{base}/a", f"{base}/b"]}}]),
                      provider, tmp_path / "cache")
            tabs = {"func": "is_expected_tabs", "result": {"type": "open_tabs_info"},
                    "expected": {"type": "rule", "rules": {"type": "url", "urls": [f"{base}/a", f"{base}/b"]}}}
            outcome = evaluate(step_task([], tabs), upstream, provider, "DONE")
            assert (outcome.status, outcome.score) == ("scored", 1.0), outcome.reason
            wrong = {**tabs, "expected": {"type": "rule", "rules": {"type": "url", "urls": [f"{base}/a"]}}}
            assert evaluate(step_task([], wrong), upstream, provider, "DONE").score == 0.0
            provider.close()
    finally:
        site.shutdown()
