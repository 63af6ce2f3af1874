"""A test stand-in for OSWorld's in-VM controller that really runs commands and serves real files (stdlib only,
so it also runs as the entry point of the test Docker image: `python3 osworld_vm_controller.py --port 5000`).

Routes and JSON shapes follow upstream's `desktop_env/server/main.py`. The "VM filesystem" is `--root`: with
root `/` (inside a container) paths are used as they are; with a temporary root (loopback tests) a VM path
`/home/user/x` is `<root>/home/user/x`, commands run with HOME=`<root>/home/user` and the literal `/home/user`
in a command is rewritten to it. `python -c "import pyautogui; ..."` works through a recording `pyautogui`
stand-in (no display here); its calls go to `<root>/pyautogui.log`. Every request is appended to
`<root>/requests.log` (one JSON line) so tests can see what the scorer asked for.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import struct
import subprocess
import sys
import threading
import zlib
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

PYAUTOGUI = '''"""Recording stand-in for pyautogui (no display in tests). ctrl+s saves the documents the test
staged as "edited but unsaved" (<tools>/unsaved/<vm path>) to their VM paths, like the app would."""
import json, os, shutil
FAILSAFE = True
def _save():
    staged, root = os.environ["QITOS_TEST_UNSAVED"], os.environ["QITOS_TEST_ROOT"]
    for folder, _, files in os.walk(staged):
        for name in files:
            source = os.path.join(folder, name)
            target = os.path.join(root, os.path.relpath(source, staged))
            os.makedirs(os.path.dirname(target), exist_ok=True)
            shutil.copyfile(source, target)
def _record(name):
    def call(*args, **kwargs):
        with open(os.environ["QITOS_TEST_PYAUTOGUI_LOG"], "a") as fh:
            fh.write(json.dumps([name, list(args), kwargs]) + "\\n")
        if name == "hotkey" and [str(a).lower() for a in args] == ["ctrl", "s"]:
            _save()
    return call
def __getattr__(name):
    return _record(name)
'''
CODE = '''#!/bin/sh
# VS Code's CLI stand-in: `code --list-extensions` prints ~/.vscode/extensions.txt; anything else does nothing.
for arg in "$@"; do
  if [ "$arg" = "--list-extensions" ]; then cat "$HOME/.vscode/extensions.txt" 2>/dev/null; exit 0; fi
done
exit 0
'''
# Outside a container the controller runs on the test host: only these programs run; anything else (and every
# shell string) is answered as done without running (task setups call sudo, apt-get, pkill, libreoffice...).
LOOPBACK_PROGRAMS = {"python", "python3", "ls", "mkdir", "cat", "echo", "true", "code"}


def png(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (10, 20, 30)) -> bytes:
    """A solid-colour PNG, built with zlib (no Pillow inside the test image)."""
    row = b"\x00" + bytes(rgb) * width
    raw = zlib.compress(row * height)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", raw) + chunk(b"IEND", b"")


class VMController:
    def __init__(self, root: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.root = Path(root).resolve()
        self.home = self.root / "home" / "user"
        self.home.mkdir(parents=True, exist_ok=True)
        self.tools = self.root / ".qitos-test"
        self.tools.mkdir(exist_ok=True)
        (self.tools / "pyautogui.py").write_text(PYAUTOGUI)
        (self.tools / "unsaved").mkdir(exist_ok=True)
        code = self.tools / "code"
        code.write_text(CODE)
        code.chmod(0o755)
        python = self.tools / "python"
        if not python.exists():
            python.symlink_to(sys.executable)
        self.terminal = ""  # what GET /terminal reports
        self.windows: set[str] | None = None  # open window names; None: every window is open
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "VMController":
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "VMController":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- the "VM" ------------------------------------------------------------------------------------
    def vm_path(self, path: str) -> Path:
        path = os.path.expandvars(path.replace("~", str(self.home), 1) if path.startswith("~") else path)
        if self.root == Path("/") or path.startswith(str(self.root) + "/"):
            return Path(path)
        return self.root / path.lstrip("/")

    def _rewrite(self, text: str) -> str:
        return text if self.root == Path("/") else text.replace("/home/user", str(self.home))

    def stage_unsaved(self, vm_path: str, data: bytes) -> None:
        """A document the "app" holds edited but unsaved; ctrl+s writes it to `vm_path`."""
        target = self.tools / "unsaved" / vm_path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def place(self, vm_path: str, data: bytes) -> None:
        target = self.vm_path(vm_path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def run(self, command: Any, shell: bool) -> dict[str, Any]:
        if isinstance(command, str) and not shell:
            command = shlex.split(command)
        command = self._rewrite(command) if isinstance(command, str) else [self._rewrite(str(c)) for c in command]
        if isinstance(command, list):
            command = [str(self.home) + c[1:] if c.startswith("~/") else c for c in command]
        if self.root != Path("/") and (shell or not command or Path(command[0]).name not in LOOPBACK_PROGRAMS):
            self.log("SKIP", "command", {"command": command, "shell": shell})
            return {"status": "success", "output": "", "error": "", "returncode": 0}
        env = {**os.environ, "HOME": str(self.home), "PATH": f"{self.tools}:{os.environ.get('PATH', '/usr/bin:/bin')}",
               "PYTHONPATH": str(self.tools), "QITOS_TEST_PYAUTOGUI_LOG": str(self.root / "pyautogui.log"),
               "QITOS_TEST_UNSAVED": str(self.tools / "unsaved"), "QITOS_TEST_ROOT": str(self.root)}
        try:
            done = subprocess.run(command, shell=shell, capture_output=True, text=True, timeout=120, env=env,
                                  cwd=self.home)
        except Exception as exc:  # noqa: BLE001 - upstream answers 500 with the message
            return {"status": "error", "message": str(exc), "_http": 500}
        return {"status": "success", "output": done.stdout, "error": done.stderr, "returncode": done.returncode}

    def tree(self, directory: Path) -> dict[str, Any]:
        node: dict[str, Any] = {"type": "directory", "name": directory.name, "children": []}
        for entry in sorted(directory.iterdir()):
            node["children"].append(self.tree(entry) if entry.is_dir() else {"type": "file", "name": entry.name})
        return node

    def log(self, method: str, path: str, body: Any) -> None:
        safe = {k: (v if isinstance(v, (str, int, float, bool, list, dict)) or v is None else f"<{len(v)} bytes>")
                for k, v in body.items()} if isinstance(body, dict) else None
        with self._lock, (self.root / "requests.log").open("a") as fh:
            fh.write(json.dumps({"method": method, "path": path, "body": safe}) + "\n")

    # -- HTTP ----------------------------------------------------------------------------------------
    def _handler(self) -> type[BaseHTTPRequestHandler]:
        vm = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def send(self, status: int, body: Any, kind: str = "application/json") -> None:
                data = body if isinstance(body, bytes) else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def body(self) -> Any:
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                kind = self.headers.get("Content-Type", "")
                if kind.startswith("application/json"):
                    return json.loads(raw or b"null")
                if kind.startswith("application/x-www-form-urlencoded"):
                    return {k: v[0] for k, v in parse_qs(raw.decode()).items()}
                if kind.startswith("multipart/form-data"):
                    message = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {kind}\r\n\r\n".encode() + raw)
                    return {part.get_param("name", header="content-disposition"): part.get_payload(decode=True)
                            for part in message.iter_parts()}
                return {}

            def do_GET(self) -> None:  # noqa: N802
                vm.log("GET", self.path, None)
                if self.path == "/screenshot":
                    self.send(200, png(), "image/png")
                elif self.path == "/accessibility":
                    tree = vm.root / "accessibility.xml"
                    self.send(200, {"AT": tree.read_text() if tree.is_file() else "<desktop-frame/>"})
                elif self.path == "/terminal":
                    self.send(200, {"output": vm.terminal})
                elif self.path == "/platform":
                    self.send(200, "Linux", "text/plain")
                elif self.path == "/cursor_position":
                    self.send(200, [0, 0])
                else:
                    self.send(404, {"error": "no route"})

            def do_POST(self) -> None:  # noqa: N802
                body = self.body()
                vm.log("POST", self.path, body)
                if self.path in ("/execute", "/setup/execute"):
                    result = vm.run(body.get("command", ""), bool(body.get("shell", False)))
                    self.send(result.pop("_http", 200), result)
                elif self.path == "/file":
                    path = vm.vm_path(body.get("file_path", ""))
                    if path.is_file():
                        self.send(200, path.read_bytes(), "application/octet-stream")
                    else:
                        self.send(404, {"error": "File not found"})
                elif self.path == "/setup/upload":
                    path = vm.vm_path(body["file_path"].decode())
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_bytes(body["file_data"])
                    self.send(200, "File Uploaded", "text/plain")
                elif self.path == "/screen_size":
                    self.send(200, {"width": 1920, "height": 1080})
                elif self.path == "/window_size":
                    self.send(200, {"width": 1920, "height": 1080})
                elif self.path == "/desktop_path":
                    self.send(200, {"desktop_path": str(vm.home / "Desktop")})
                elif self.path == "/wallpaper":
                    self.send(200, png(8, 8, (0, 0, 255)), "image/png")
                elif self.path == "/list_directory":
                    path = vm.vm_path(body.get("path", ""))
                    if path.is_dir():
                        self.send(200, {"directory_tree": vm.tree(path)})
                    else:
                        self.send(404, {"error": "Directory not found"})
                elif self.path in ("/setup/activate_window", "/setup/close_window") and vm.windows is not None \
                        and body.get("window_name") not in vm.windows:
                    self.send(404, {"error": f"Window {body.get('window_name')} not found"})
                elif self.path.startswith("/setup/"):
                    self.send(200, "ok", "text/plain")
                else:
                    self.send(404, {"error": "no route"})

        return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="/")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=5000)
    args = parser.parse_args()
    controller = VMController(Path(args.root), args.host, args.port)
    print(f"controller on {controller.url}, root {controller.root}", flush=True)
    controller._server.serve_forever()


if __name__ == "__main__":
    main()
