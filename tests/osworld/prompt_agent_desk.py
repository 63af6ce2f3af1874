"""A loopback stand-in for the OSWorld VM whose screen is a pure function of what was run on it, and the scripted
model replies of the prompt-agent differential test (a pure function of the request).

`Desk` answers the controller routes both QitOS's client and upstream's `PythonController` use. Its observation
after `k` pyautogui commands, the last one being `code`, is `observation(k, code)`: a small noisy PNG and an
accessibility tree in the ubuntu namespaces (showing/visible/enabled states, positions and sizes, quotes in
text, hidden and zero-size nodes, images), large enough to be trimmed after the first action. A request to
`/platform` or `/setup/*` (a task being prepared) starts a new episode (k = 0). With `by_code=False` the screen
depends on `k` only (computer_13, where upstream's controller words its commands differently from QitOS's).
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from PIL import Image

PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "
NS = {"st": "https://accessibility.ubuntu.example.org/ns/state",
      "attr": "https://accessibility.windows.example.org/ns/attributes",
      "cp": "https://accessibility.ubuntu.example.org/ns/component",
      "val": "https://accessibility.ubuntu.example.org/ns/value"}
WIDTH, HEIGHT = 96, 64
WORDS = ["File", "Edit", "View", "Save", "Open", "Tools", "Help", "Bold", "Zoom", "Print", "Undo", "Format"]


def _rng(k: int, code: str) -> random.Random:
    return random.Random(hashlib.sha256(f"{k}|{code}".encode()).hexdigest())


def screenshot(k: int, code: str) -> bytes:
    rng = _rng(k, code)
    image = Image.new("RGB", (WIDTH, HEIGHT), (rng.randrange(256), 40, 90))
    pixels = image.load()
    for _ in range(WIDTH * HEIGHT // 3):
        pixels[rng.randrange(WIDTH), rng.randrange(HEIGHT)] = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
    for x in range(60, 90):  # one flat block: set-of-marks skips a box of one colour
        for y in range(40, 60):
            pixels[x, y] = (0, 0, 0)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _node(tag: str, *, name: str = "", text: str | None = None, x: int = 1, y: int = 1, w: int = 10, h: int = 8,
          showing: bool = True, enabled: bool = True, image: bool = False, cls: str = "") -> str:
    attrs = {"name": name, "st:showing": str(showing).lower(), "st:visible": "true",
             "st:enabled": str(enabled).lower(), "cp:screencoord": f"({x}, {y})", "cp:size": f"({w}, {h})"}
    if cls:
        attrs["attr:class"] = cls
        attrs["attr:description"] = f"{cls} widget"
    if image:
        attrs["image"] = "true"
    body = " ".join(f"{k}={quoteattr(v)}" for k, v in attrs.items())
    return f"<{tag} {body}>{escape(text) if text else ''}</{tag}>"


def accessibility_tree(k: int, code: str) -> str:
    rng = _rng(k, code)
    nodes = [
        _node("push-button", name=rng.choice(WORDS), x=2, y=2, w=20, h=10, cls="GtkButton"),
        _node("label", name="", text=f'Say "{rng.choice(WORDS)}" now', x=30, y=2, w=30, h=10),
        _node("entry", name="search", text=None, x=2, y=20, w=40, h=12),
        _node("menu-item", name="hidden", showing=False, x=5, y=5),
        _node("push-button", name="zero", x=5, y=5, w=0, h=4),
        _node("image", name="", x=44, y=20, w=14, h=14, image=True),
        _node("push-button", name="flat", x=62, y=42, w=20, h=12),  # over the flat block
        _node("paragraph", text="disabled text", enabled=False, x=2, y=40),
        _node("check-box", name=rng.choice(WORDS) + " option", x=2, y=48, w=12, h=12),
    ]
    if k >= 1:  # a large screen after the first action: more than 10000 gpt-4 tokens once linearized
        nodes += [_node("table-cell", name=f"{rng.choice(WORDS)} cell {i} {rng.randrange(10 ** 6)}",
                        text=f"value {i} {rng.choice(WORDS)}", x=(i * 7) % 80, y=(i * 5) % 50, w=9, h=7)
                  for i in range(1200)]
    namespaces = " ".join(f'xmlns:{p}="{u}"' for p, u in NS.items())
    return (f'<desktop-frame {namespaces} name="Desktop"><application name="app">'
            + "".join(nodes) + "</application></desktop-frame>")


class Desk:
    """The stand-in VM (stdlib HTTP server on a free loopback port)."""

    def __init__(self, by_code: bool = True) -> None:
        self.by_code = by_code
        self.k, self.code = 0, ""
        self.commands: list[list[str]] = []  # every `python -c` command, as sent (["--episode--"]: /platform)
        self.paths: list[str] = []  # every route asked for, in order (for debugging a divergence)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def __enter__(self) -> "Desk":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def screen(self) -> tuple[int, str]:
        with self._lock:
            return self.k, self.code if self.by_code else ""

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        desk = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: bytes | Any, kind: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:  # noqa: N802
                desk.paths.append(self.path)
                if self.path == "/screenshot":
                    self._send(200, screenshot(*desk.screen()), "image/png")
                elif self.path == "/accessibility":
                    self._send(200, {"AT": accessibility_tree(*desk.screen())})
                elif self.path == "/platform":
                    with desk._lock:
                        desk.k, desk.code = 0, ""
                        desk.commands.append(["--episode--"])
                    self._send(200, b"Linux", "text/plain")
                else:
                    self._send(404, {"error": "not here"})

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                desk.paths.append(self.path)
                if self.path.startswith("/setup"):
                    with desk._lock:
                        desk.k, desk.code = 0, ""
                    self._send(200, {"status": "success", "output": "", "error": "", "returncode": 0})
                elif self.path == "/execute":
                    try:
                        command = json.loads(raw or b"{}").get("command")
                    except ValueError:
                        command = None
                    if isinstance(command, list) and command[:2] == ["python", "-c"]:
                        with desk._lock:
                            desk.commands.append(command)
                            desk.k += 1
                            desk.code = command[2].removeprefix(PREFIX)
                    self._send(200, {"status": "success", "output": "", "error": "", "returncode": 0})
                else:
                    self._send(404, {"error": "not here"})

        return Handler


# -- scripted replies: a function of the request's messages ---------------------------------------------------
PYAUTOGUI_REPLIES = [
    "I will click the button.\n```python\npyautogui.click(12, 7)\n```",
    "Type, then confirm.\n```python\npyautogui.typewrite('hello \"world\"')\n```\n```python\npyautogui.press('enter')\n```",
    "```python\npyautogui.moveTo(10, 10); pyautogui.click()\n```",
    "Nothing to run in this reply.",
    "```python\npyautogui.hotkey('ctrl', 's')\nDONE\n```",
    "```\nWAIT\n```",
    "FAIL",
    "  ```python\nimport time\npyautogui.scroll(-3)\ntime.sleep(0.0)\n```  ",
]
SOM_REPLIES = [
    "```python\npyautogui.click(*tag_1)\n```",
    "```python\nx, y = tag_2\npyautogui.doubleClick(x, y)\n```",
    "Nothing to do.",
    "DONE",
    "```python\npyautogui.click(*tag_3)\npyautogui.typewrite('x')\n```",
]
COMPUTER_13_REPLIES = [
    '```json\n{"action_type": "CLICK", "x": 10, "y": 20}\n```',
    '```json\n{"action_type": "TYPING", "parameters": {"text": "hi"}}\n```\n'
    '```json\n{"action_type": "PRESS", "parameters": {"key": "enter"}}\n```',
    '{"action_type": "HOTKEY", "parameters": {"keys": ["ctrl", "c"]}}',
    "DONE",
    '```\n{"action_type": "MOVE_TO", "parameters": {"x": 30, "y": 40}}\n```',
    "FAIL",
    "I am not sure what to do.",  # upstream's episode raises here
    "WAIT",
    '```json\n{"action_type": "TYPE", "text": "hello world"}\n```',  # upstream's prompt's own example: refused
    '{"action_type": "PRESS", "parameters": {"key": "Enter"}}',  # a known key (upstream lower-cases it)
    '```json\n{"action_type": "PRESS", "key": "pgdown"}\n```',  # not in KEYBOARD_KEYS: upstream raises
]


def reply_for(messages: list[dict[str, Any]], replies: list[str]) -> str:
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).digest()
    return replies[int.from_bytes(digest[:4], "big") % len(replies)]


# -- the edges: failed model calls and malformed computer_13 actions, one scenario per episode -----------------
def step_of(messages: list[dict[str, Any]]) -> int:
    """The episode's step a request is for: the earlier steps it shows (the window is never cut here); upstream's
    shorter resend ([system, last user]) looks like step 0."""
    return (len(messages) - 2) // 2


def _error_body(code: str | None, message: str) -> str:
    error: dict[str, Any] = {"message": message, "type": "invalid_request_error", "param": None}
    if code is not None:
        error["code"] = code
    return json.dumps({"error": error})


# replies by step where the endpoint does answer (pyautogui, computer_13)
STEP_REPLIES = {
    "pyautogui": ["```python\npyautogui.click(12, 7)\n```", "```python\npyautogui.typewrite('x')\n```", "DONE"],
    "computer_13": ['```json\n{"action_type": "CLICK", "parameters": {"x": 3, "y": 4}}\n```',
                    '```json\n{"action_type": "TYPING", "parameters": {"text": "x"}}\n```', "DONE"],
}
# scenario -> the step it fails at (None: every step) and how; each is a function of the request only
FAILURES = ["500 once", "500 always", "502 html", "context length", "context length twice", "content null"]
# malformed computer_13 actions (the list) and a few neighbours, as replies by step
MALFORMED = {
    "moves": ['```json\n{"action_type": "MOVE_TO", "parameters": {}}\n```\n'
              '```json\n{"action_type": "MOVE_TO", "parameters": {"x": "10", "y": "20"}}\n```',
              '{"action_type": "DRAG_TO", "parameters": {}}', "DONE"],
    "clicks": ['```json\n{"action_type": "CLICK", "parameters": {"button": "Left", "x": 5, "y": 6}}\n```',
               '```json\n{"action_type": "HOTKEY", "parameters": {"keys": []}}\n```',
               '```json\n{"action_type": "TYPING", "parameters": {"text": 5}}\n```\n```json\n"WAIT"\n```'],
    "counts": ['```json\n{"action_type": "CLICK", "parameters": {"x": 1, "y": 2, "num_clicks": "2"}}\n```',
               '```json\n{"action_type": "MOUSE_DOWN", "parameters": {"x": 1, "y": 2}}\n```', "DONE"],
    "specials": ['```json\n{"action_type": "DONE"}\n```\n```json\n{"action_type": "SCROLL", "dx": 2, "dy": -1}\n```',
                 "WAIT", '```json\n{"x": 1, "y": 2}\n```'],
}


def edge_answer(scenario: str, space: str, body: dict[str, Any]) -> Any:
    """The endpoint's answer to a request of an episode in `scenario` (a FAILURES or MALFORMED key)."""
    from tests.support.openai_server import Fail, Raw, Reply

    messages = body["messages"]
    k = step_of(messages)
    if scenario in MALFORMED:
        return Reply(text=MALFORMED[scenario][k])
    context = Raw(_error_body("context_length_exceeded", "This model's maximum context length is 128000 tokens."),
                  400, "application/json")
    if scenario == "500 once" and k == 0:
        return Raw(_error_body("server_error", "The server had an error processing your request."), 500,
                   "application/json")
    if scenario == "500 always":
        return Fail(500)  # an error without a code
    if scenario == "502 html" and k == 1:
        return Raw("<html><body>502 Bad Gateway</body></html>", 502, "text/html")
    if scenario == "context length" and len(messages) > 2 or scenario == "context length twice":
        return context
    if scenario == "content null" and k == 1:
        return Reply(text=None)
    return Reply(text=STEP_REPLIES[space][k])
