"""Messages between the two sides: length-prefixed JSON over a Unix socket.

JSON, never pickle, in both directions: the scoring side must not run code the agent side sends
(unpickling does), and plain data is all that may cross anyway. A message larger than
`MAX_MESSAGE_BYTES` ends the connection instead of exhausting the scoring side's memory.

A reader takes whatever the socket holds in one `recv` and keeps what follows the message for the next
call: a message usually costs one system call (its header and body arrive together, often with the next
message), and the socket stays blocking (a timeout is a `poll`, not a switch of the socket's mode, two
more system calls per message). Messages are decoded with orjson (the standard codec when orjson refuses
what `json` accepts, e.g. NaN), so both give the same values.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import threading
from typing import Any, Callable

import orjson

from qitos.trace.writer import TRACE_JSON_OPTIONS  # trace records cross the wire as the writer writes them

MAX_MESSAGE_BYTES = 512 * 1024 * 1024
_HEADER = struct.Struct("!I")
_READ_SIZE = 1 << 16  # per recv: below the allocator's mmap threshold (a larger read costs an mmap and munmap)


def encode(message: dict[str, Any]) -> bytes:
    """A message's JSON. Its trace records (`ops`, usually most of its bytes) are encoded with orjson, as the trace
    writer writes them (a third of the standard codec's cost): a non-finite float becomes null, as it does in the
    trace file anyway. Everything else (a call's parameters, an outcome, a reply) with the standard codec, which
    keeps NaN as it was sent (the model client refuses it, say, rather than sending null). What orjson refuses (an
    integer beyond 64 bits, a lone surrogate) goes all through the standard codec."""
    ops = message.get("ops")
    if ops:
        try:
            records = orjson.dumps(ops, default=str, option=TRACE_JSON_OPTIONS)
        except TypeError:
            records = None
        if records is not None:
            rest = json.dumps({k: v for k, v in message.items() if k != "ops"}, default=str, separators=(",", ":"))
            return rest[:-1].encode("utf-8") + (b',"ops":' if len(rest) > 2 else b'"ops":') + records + b"}"
    return json.dumps(message, default=str, separators=(",", ":")).encode("utf-8")


class WireClosed(EOFError):
    """The other side closed the connection (or sent something that is not a message)."""


class Channel:
    """One socket, whole messages each way; `send` is thread-safe, `recv` belongs to one reader."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._send_lock = threading.Lock()

    def send(self, message: dict[str, Any]) -> None:
        data = encode(message)
        with self._send_lock:
            self.sock.sendall(_HEADER.pack(len(data)) + data)

    def send_nowait(self, message: dict[str, Any], finish: Callable[[Callable[[], None]], None]) -> None:
        """Send without waiting for the peer (the hub's loop must never block on a job that stops reading): what
        the socket takes now goes at once, and `finish(send_rest)` sends the rest on another thread, or the whole
        message when another thread is sending on this socket. Messages stay whole and in order either way."""
        data = encode(message)
        data = _HEADER.pack(len(data)) + data
        if not self._send_lock.acquire(blocking=False):
            finish(lambda: self._send_bytes(data))
            return
        try:
            sent = self.sock.send(data, socket.MSG_DONTWAIT)
        except BlockingIOError:
            sent = 0
        except BaseException:
            self._send_lock.release()
            raise
        if sent == len(data):
            self._send_lock.release()
            return

        def send_rest() -> None:
            try:
                self.sock.sendall(data[sent:])
            finally:
                self._send_lock.release()

        finish(send_rest)

    def _send_bytes(self, data: bytes) -> None:
        with self._send_lock:
            self.sock.sendall(data)

    def recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message; None when `timeout` passes before any of it arrived (a partial message is kept for
        the next call, and once part of a message is here its rest is waited for)."""
        while True:
            message = self._take()
            if message is not None:
                return message
            if timeout is not None and not self._buffer and not self._readable(timeout):
                return None
            self._fill()

    _buffer: bytearray | None = None
    _poll: Any = None

    def _take(self) -> dict[str, Any] | None:
        buffer = self._buffer
        if buffer is None or len(buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(buffer)
        if size > MAX_MESSAGE_BYTES:
            raise WireClosed(f"message of {size} bytes exceeds {MAX_MESSAGE_BYTES}")
        end = _HEADER.size + size
        if len(buffer) < end:
            return None
        body = buffer[_HEADER.size:end]
        del buffer[:end]
        try:
            message = orjson.loads(body)
        except orjson.JSONDecodeError:
            try:
                message = json.loads(body)
            except ValueError as exc:
                raise WireClosed(f"not a JSON message: {exc}") from None
        if not isinstance(message, dict):
            raise WireClosed("a message must be a JSON object")
        return message

    def take(self) -> dict[str, Any] | None:
        """The next whole message already read, without reading (`fill_nowait` reads)."""
        return self._take()

    def fill_nowait(self) -> WireClosed | None:
        """Read what the socket holds now, without waiting (none: nothing happens); the connection's end is
        returned, not raised, so the whole messages before it are taken first."""
        try:
            self._fill(socket.MSG_DONTWAIT)
        except BlockingIOError:
            pass
        except WireClosed as exc:
            return exc
        return None

    def _readable(self, timeout: float) -> bool:
        if self._poll is None:
            self._poll = select.poll()
            self._poll.register(self.sock, select.POLLIN)
        try:
            return bool(self._poll.poll(max(0.0, timeout) * 1000))
        except (OSError, ValueError) as exc:  # the socket was closed under us
            raise WireClosed(str(exc)) from None

    def _fill(self, flags: int = 0) -> None:
        """Block until more bytes arrive (or the connection ends) and add them to the buffer (`flags`
        MSG_DONTWAIT: raise BlockingIOError instead of waiting)."""
        if self.sock.gettimeout() is not None:  # e.g. left by the hello's read: this reader blocks
            self.sock.settimeout(None)
        buffer = self._buffer
        if buffer is None:
            buffer = self._buffer = bytearray()
        want = _READ_SIZE
        if len(buffer) >= _HEADER.size:  # the rest of a large message in bigger reads
            want = max(want, min(_HEADER.size + _HEADER.unpack_from(buffer)[0] - len(buffer), 1 << 20))
        try:
            chunk = self.sock.recv(want, flags)
        except BlockingIOError:
            raise
        except OSError as exc:
            raise WireClosed(str(exc)) from None
        if not chunk:
            raise WireClosed("connection closed")
        buffer += chunk

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
