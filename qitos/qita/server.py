"""Run the board with uvicorn, in the foreground (the CLI) or in a thread (tests, benchmarks).

The socket is bound before uvicorn starts, so port 0 means "any free port" and the real
address is known (and printable) before the first request.
"""

from __future__ import annotations

import errno
import socket
import threading
import time

import uvicorn

from .app import build_app
from .config import BoardConfig, BoardConfigError


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OverflowError:  # a port past 65535 (BoardConfig.validate says so first)
        sock.close()
        raise BoardConfigError(f"--port {port}: a port is 1 to 65535 (0 = any free port), e.g. --port 8765") from None
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, 48):
            hint = f"--port {port} is in use (another board?); pick another --port, or 0 for any free port"
        elif exc.errno == errno.EACCES:
            hint = f"--port {port} is below 1024 and needs root; pick a port from 1024 up, e.g. --port 8765"
        else:
            hint = "check --host (an address of this machine, e.g. 127.0.0.1)"
        raise BoardConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; {hint}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


class BoardServer:
    """A board on a bound socket; `start()` serves in a daemon thread, `serve()` in the foreground."""

    def __init__(self, config: BoardConfig, log_level: str = "warning") -> None:
        config.validate()
        self.sock = bind(config.host, config.port)
        config.port = self.sock.getsockname()[1]
        self.config = config
        self.app = build_app(config)
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level=log_level, access_log=False, lifespan="off"))
        self._thread: threading.Thread | None = None

    def serve(self) -> None:
        self.server.run(sockets=[self.sock])

    def start(self, timeout: float = 10.0) -> "BoardServer":
        self._thread = threading.Thread(target=self.serve, name="qita-board", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the board did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sock.close()
        self.app.state.board.index.close()

    def url(self, path: str = "/") -> str:
        return self.config.url(path)
