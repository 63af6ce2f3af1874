"""A command's output as a sandbox keeps it: the first `head` bytes and the last `tail` bytes, cut on UTF-8
character boundaries, with whether the WHOLE stream is valid UTF-8.

Why: a command may print gigabytes, so a sandbox keeps a bounded part. Keeping the head alone (what the sandbox
did) hides the output's end, which is what an agent that truncates its own input (upstream CyBench's keeps the
first and last tokens) shows its model; and a cut inside a multi-byte character turned valid UTF-8 into an
"invalid" output. Here the cut never splits a character, and the decode error is the one a strict
`bytes.decode("utf-8")` of everything the command printed raises (same message, same positions), whatever was
dropped.
"""

from __future__ import annotations

import codecs
import io
import threading
from collections import deque
from typing import IO

CUT_MARKER = "\n[... {dropped} bytes of output not kept ...]\n"


class OutputCap:
    """Feed a stream's chunks (`feed`), then `finish()`; read `text`, `dropped` and `decode_error`."""

    def __init__(self, head: int, tail: int = 0) -> None:
        if head <= 0 or tail < 0:
            raise ValueError(f"OutputCap needs head > 0 and tail >= 0, got {head}, {tail}")
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self._tail: deque[bytes] = deque()
        self._tail_size = 0
        self.total = 0
        self.dropped = 0
        self.decode_error: str | None = None
        self.text = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def feed(self, chunk: bytes) -> None:
        self._check(chunk, final=False)
        self.total += len(chunk)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        if not self.tail_limit:
            self.dropped += len(chunk)
            return
        self._tail.append(bytes(chunk))
        self._tail_size += len(chunk)
        while self._tail_size - len(self._tail[0]) >= self.tail_limit:  # whole chunks the tail no longer needs
            self._tail_size -= len(self._tail[0])
            self.dropped += len(self._tail.popleft())

    def finish(self) -> OutputCap:
        self._check(b"", final=True)
        rest = b"".join(self._tail)
        if len(rest) > self.tail_limit:
            self.dropped += len(rest) - self.tail_limit
            rest = rest[len(rest) - self.tail_limit:]
        head = bytes(self.head)
        if not self.dropped:  # all of it, in one piece
            self.text = (head + rest).decode("utf-8", errors="replace")
            return self
        cut_head, cut_rest = _boundary_end(head), _boundary_start(rest)  # kept parts: whole characters only
        self.dropped += len(head) - cut_head + cut_rest
        self.text = head[:cut_head].decode("utf-8", errors="replace")
        if self.tail_limit:
            self.text += CUT_MARKER.format(dropped=self.dropped) + rest[cut_rest:].decode("utf-8", errors="replace")
        return self

    def _check(self, chunk: bytes, *, final: bool) -> None:
        """Strict UTF-8 over the whole stream; keep the first error, as `bytes.decode` words it."""
        if self.decode_error is not None:
            return
        pending = len(self._decoder.buffer)  # type: ignore[attr-defined]  # BufferedIncrementalDecoder
        try:
            self._decoder.decode(chunk, final)
        except UnicodeDecodeError as exc:
            self.decode_error = _message(exc, self.total - pending)


def _message(exc: UnicodeDecodeError, offset: int) -> str:
    """`str(exc)` with its positions counted from the stream's start (CPython's UnicodeDecodeError wording)."""
    start, end = offset + exc.start, offset + exc.end
    if exc.end - exc.start == 1:
        return (f"'{exc.encoding}' codec can't decode byte 0x{exc.object[exc.start]:02x} in position {start}: "
                f"{exc.reason}")
    return f"'{exc.encoding}' codec can't decode bytes in position {start}-{end - 1}: {exc.reason}"


def _boundary_end(data: bytes) -> int:
    """Where to cut `data` so it does not end inside a UTF-8 character (an incomplete sequence is dropped)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # a lead byte or ASCII: does its sequence fit in what is left?
            need = 1 if byte < 0x80 else 2 if byte >> 5 == 0b110 else 3 if byte >> 4 == 0b1110 else \
                4 if byte >> 3 == 0b11110 else 1
            return len(data) if need <= back else len(data) - back
    return len(data)


def _boundary_start(data: bytes) -> int:
    """How many continuation bytes open `data` (the end of a character whose start was dropped), at most 3."""
    skip = 0
    while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
        skip += 1
    return skip


def decode_error(data: bytes) -> str | None:
    """`str` of the UnicodeDecodeError a strict UTF-8 decode of `data` raises, or None when it decodes."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return str(exc)
    return None


_READ_CHUNK = 65536


class _CappedReader(threading.Thread):
    """Drain a pipe to EOF, keeping what `cap` keeps, so the child never blocks on output."""

    def __init__(self, stream: io.BufferedReader, cap: OutputCap) -> None:
        super().__init__(daemon=True)
        self.stream, self.cap = stream, cap

    def run(self) -> None:
        try:
            while chunk := self.stream.read1(_READ_CHUNK):
                self.cap.feed(chunk)
        except (OSError, ValueError):
            pass


def _feed_stdin(stream: IO[bytes], data: bytes) -> None:
    try:
        stream.write(data)
    except (BrokenPipeError, OSError, ValueError):
        pass  # the command exited without reading everything; that is its business
    finally:
        try:
            stream.close()
        except OSError:
            pass
