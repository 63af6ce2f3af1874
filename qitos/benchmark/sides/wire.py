"""Messages between the two sides: length-prefixed JSON over a Unix socket.

JSON, never pickle, in both directions: the scoring side must not run code the agent side sends
(unpickling does), and plain data is all that may cross anyway. A message larger than
`MAX_MESSAGE_BYTES` ends the connection instead of exhausting the scoring side's memory.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from typing import Any

MAX_MESSAGE_BYTES = 512 * 1024 * 1024
_HEADER = struct.Struct("!I")


class WireClosed(EOFError):
    """The other side closed the connection (or sent something that is not a message)."""


class Channel:
    """One socket, whole messages each way; `send` is thread-safe, `recv` belongs to one reader."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message, default=str, separators=(",", ":")).encode("utf-8")
        with self._send_lock:
            self.sock.sendall(_HEADER.pack(len(data)) + data)

    def recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message; None when `timeout` passes first (a partial message is kept for the next call)."""
        self.sock.settimeout(timeout)
        try:
            header = self._read(_HEADER.size, first=True)
        except TimeoutError:
            return None
        (size,) = _HEADER.unpack(header)
        if size > MAX_MESSAGE_BYTES:
            raise WireClosed(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
        self.sock.settimeout(None)
        body = self._read(size)
        try:
            message = json.loads(body)
        except ValueError as exc:
            raise WireClosed(f"not a JSON message: {exc}") from None
        if not isinstance(message, dict):
            raise WireClosed("a message must be a JSON object")
        return message

    def _read(self, size: int, first: bool = False) -> bytes:
        chunks, got = [], 0
        while got < size:
            try:
                chunk = self.sock.recv(min(size - got, 1 << 20))
            except TimeoutError:
                if first and got == 0:
                    raise
                self.sock.settimeout(None)  # mid-message: wait for the rest
                continue
            except OSError as exc:
                raise WireClosed(str(exc)) from None
            if not chunk:
                raise WireClosed("connection closed")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
