"""What one board serves and how it is exposed: log directory, results files, address, token.

The board is read-only and local by default. Binding anything but loopback exposes traces
(which hold prompts and model outputs) to the network, so that needs a token; `validate()`
refuses a non-loopback config without one instead of silently serving it.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import secrets
import socket
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
TOKEN_SHAPE = re.compile(r"^[A-Za-z0-9._~-]{8,200}$")


class BoardConfigError(ValueError):
    """The board cannot start with this configuration (a user-fixable problem)."""


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    return secrets.token_urlsafe(24)


def default_cache_dir() -> Path:
    """`$QITA_CACHE_DIR`, else `$XDG_CACHE_HOME/qitos/qita`, else `~/.cache/qitos/qita`."""
    env = os.environ.get("QITA_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "qitos" / "qita"


MAX_DISCOVERED = 2000


def discover_results(logdir: Path) -> list[Path]:
    """Results files `qit bench run` writes by default: `results/*.jsonl` beside (or inside) the logdir."""
    logdir = Path(logdir).expanduser().resolve()
    for folder in (logdir.parent / "results", logdir / "results"):
        if folder.is_dir():
            return sorted(p for p in folder.glob("*.jsonl") if p.is_file())[:MAX_DISCOVERED]
    return []


@dataclass
class BoardConfig:
    logdir: Path
    results: list[Path] = field(default_factory=list)
    host: str = "127.0.0.1"
    port: int = 8765
    token: str | None = None
    cache_dir: Path | None = None
    # Hosts accepted in the Host header on loopback (DNS-rebinding guard); None accepts any.
    allowed_hosts: frozenset[str] | None = None
    refresh_seconds: float = 2.0

    def __post_init__(self) -> None:
        self.logdir = Path(self.logdir).expanduser().resolve()
        self.results = [Path(p).expanduser().resolve() for p in self.results]
        if self.cache_dir is not None:
            self.cache_dir = Path(self.cache_dir).expanduser()
        if self.allowed_hosts is None and is_loopback(self.host):
            self.allowed_hosts = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})

    def validate(self) -> None:
        if not 0 <= self.port <= 65535:
            raise BoardConfigError(f"--port {self.port}: a port is 1 to 65535 (0 = any free port), e.g. --port 8765")
        if not self.logdir.is_dir():
            raise BoardConfigError(f"--logdir {self.logdir}: no such directory; point it at a folder of QitOS runs "
                                   "(the --trace-logdir of `qit bench run`, 'runs' by default)")
        for path in self.results:
            if path.is_dir():
                raise BoardConfigError(f"--results {path}: is a directory; give results JSONL file(s), e.g. "
                                       f"--results {path}/*.jsonl")
            if not path.is_file():
                raise BoardConfigError(f"--results {path}: no such file")
        if self.token is not None and not TOKEN_SHAPE.match(self.token):
            raise BoardConfigError("--token must be 8 to 200 characters of letters, digits and . _ ~ -")
        if not is_loopback(self.host) and not self.token:
            raise BoardConfigError(f"--host {self.host} is not loopback: the board would expose traces to the network, "
                                   "so it needs --token (or let `qita board` generate one)")

    def index_path(self) -> Path:
        """Where the SQLite index of this logdir lives: outside the logdir, keyed by its path."""
        digest = hashlib.sha256(str(self.logdir).encode()).hexdigest()[:16]
        base = self.cache_dir or default_cache_dir()
        try:
            base.mkdir(parents=True, exist_ok=True)
            probe = base / f".probe-{os.getpid()}"
            probe.write_text("ok")
            probe.unlink()
        except OSError:
            base = Path(tempfile.gettempdir()) / f"qitos-qita-{os.getuid()}"
            base.mkdir(parents=True, exist_ok=True)
        return base / f"{digest}.sqlite"

    def base_url(self) -> str:
        host = socket.gethostname() if self.host in ("0.0.0.0", "::") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}"

    def url(self, path: str = "/") -> str:
        """A URL for a page; carries the token so the first visit sets the cookie."""
        sep = "&" if "?" in path else "?"
        return self.base_url() + path + (f"{sep}token={self.token}" if self.token else "")
