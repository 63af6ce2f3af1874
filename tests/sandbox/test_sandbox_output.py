"""A command's kept output: head and tail on character boundaries, the whole stream's decode error; in bwrap too."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from qitos.sandbox.bwrap import BwrapSandbox
from qitos.sandbox.output import OutputCap

_OK, _REASON = BwrapSandbox.available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"bwrap sandbox unavailable: {_REASON}")


def kept(data: bytes, head: int, tail: int = 0, chunk: int | None = None) -> OutputCap:
    cap = OutputCap(head, tail)
    sizes = random.Random(len(data)).choices(range(1, 9000), k=len(data)) if chunk is None else [chunk] * len(data)
    at = 0
    for size in sizes:
        if at >= len(data):
            break
        cap.feed(data[at:at + size])
        at += size
    return cap.finish()


def strict(data: bytes) -> str | None:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize("data", [
    b"ok", b"a" * 50_000 + b"\xff" + b"b" * 10, "é".encode() * 40_000 + b"\xe4\xbd", b"x\xe4\xbdy" + b"z" * 30_000,
    "你".encode() * 10_000, b"\xc3" + b"a" * 100, b"a" * 25_000 + b"\xf0\x9f\x98" + b"!", b"\xed\xa0\x80 surrogate",
])
def test_decode_error_is_the_whole_streams_in_bytes_decode_wording(data: bytes) -> None:
    for chunk in (None, 1, 3, 65536):
        assert kept(data, 1000, 1000, chunk).decode_error == strict(data)
        assert kept(data, 20_000, 0, chunk).decode_error == strict(data)


def test_a_cut_never_splits_a_character_and_keeps_both_ends() -> None:
    wide = "你".encode() * 10_000  # 30 kB of a 3-byte character, cut at 20,000 (inside one) and at the tail
    head_only = kept(wide, 20_000)
    assert head_only.decode_error is None and head_only.text == "你" * 6666 and head_only.dropped == 30_000 - 19_998
    both = kept(wide, 20_000, 5_000)
    assert both.decode_error is None and "\ufffd" not in both.text
    assert both.text.startswith("你" * 6666 + "\n[... ") and both.text.endswith("...]\n" + "你" * 1666)
    assert both.dropped == 30_000 - 19_998 - 4_998 and f"[... {both.dropped} bytes of output not kept ...]" in both.text
    whole = kept(wide, 20_000, 20_000)  # fits in head + tail: nothing dropped, no marker
    assert whole.dropped == 0 and whole.text == "你" * 10_000


def test_seq_past_the_head_keeps_its_end() -> None:
    data = ("a" * 19_999 + "é\n").encode() + "".join(f"{i}\n" for i in range(1, 30_001)).encode()
    cap = kept(data, 20_000, 20_000)
    assert cap.decode_error is None and cap.text.startswith("a" * 19_999 + "\n[... ")  # é straddled the cut: dropped
    assert cap.text.endswith("29999\n30000\n") and cap.dropped == len(data) - 19_999 - 20_000


@needs_bwrap
def test_sandbox_keeps_head_and_tail_and_runs_in_the_alias(tmp_path: Path) -> None:
    with BwrapSandbox(tmp_path / "w", max_output_bytes=20_000, max_output_tail_bytes=20_000,
                      work_alias="/tmp/cyber-bench") as box:
        result = box.run("pwd; head -c 19994 /dev/zero | tr '\\0' a; printf '\\303\\251\\n'; seq 1 30000; "
                         "yes 你 | head -n 10000 | tr -d '\\n' >&2; echo made > here.txt; ls /task")
        assert result.exit_code == 0 and result.truncated and result.stdout_decode_error is None
        assert result.stdout.startswith("/tmp/cyber-bench\n" + "a" * 19_982) and "\ufffd" not in result.stdout
        assert result.stdout.endswith("29999\n30000\nhere.txt\n")
        assert result.stderr_decode_error is None and result.stderr == "你" * 10_000
        assert (tmp_path / "w" / "here.txt").read_text() == "made\n"  # the alias is the work dir (also /task)
        bad = box.run("head -c 25000 /dev/zero | tr '\\0' a; printf '\\377'; head -c 25000 /dev/zero | tr '\\0' b")
        assert bad.stdout_decode_error == strict(b"a" * 25_000 + b"\xff")  # in the dropped middle, still found
    with pytest.raises(ValueError, match="work_alias"):
        BwrapSandbox(tmp_path / "w", work_alias="/etc/x")
