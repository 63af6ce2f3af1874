"""BwrapSandbox guarantees: no network, read-only host, time limit kills the tree, capped output."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest

from qitos.sandbox import probe as sandbox_module
from qitos.sandbox.bwrap import (
    WORK_MOUNT,
    BwrapSandbox,
    SandboxSetupError,
    SandboxUnavailable,
)

_OK, _REASON = BwrapSandbox.available()
needs_bwrap = pytest.mark.skipif(not _OK, reason=f"bwrap sandbox unavailable: {_REASON}")


@pytest.fixture
def box(tmp_path: Path):
    sb = BwrapSandbox(tmp_path / "work", timeout_seconds=20)
    yield sb
    sb.close()


@needs_bwrap
def test_exit_codes_and_argv_form(box: BwrapSandbox) -> None:
    assert box.run("true").exit_code == 0
    assert box.run("exit 7").exit_code == 7
    assert box.run("no-such-command-xyz").exit_code == 127
    result = box.run(["printf", "%s|", "a b", "c"])
    assert result.exit_code == 0 and result.stdout == "a b|c|"
    assert box.run("kill -9 $$").exit_code == 137  # killed by a signal: 128 + SIGKILL


@needs_bwrap
def test_stdin_and_stderr(box: BwrapSandbox) -> None:
    result = box.run("tr a-z A-Z; echo oops >&2", stdin="hello sandbox\n")
    assert result.stdout == "HELLO SANDBOX\n"
    assert result.stderr == "oops\n"
    assert not result.timed_out and not result.truncated
    assert box.run("cat").stdout == ""  # no stdin given: reads EOF at once


@needs_bwrap
def test_work_dir_is_cwd_and_persists_on_host(box: BwrapSandbox) -> None:
    result = box.run("pwd; echo data > made.txt; mkdir -p sub && echo x > sub/y")
    assert result.stdout.strip() == WORK_MOUNT
    assert (box.work_dir / "made.txt").read_text() == "data\n"
    assert (box.work_dir / "sub" / "y").exists()
    assert box.run("cat made.txt").stdout == "data\n"


@needs_bwrap
def test_env_and_user(tmp_path: Path) -> None:
    with BwrapSandbox(tmp_path / "w", env={"QITOS_X": "1 2"}) as sb:
        out = sb.run('echo "$QITOS_X|$HOME|$(id -u)|$(whoami)"').stdout.strip()
    assert out == "1 2|/home/sandbox|1000|sandbox"


def _serve_once(server: socket.socket, accepted: list[bool]) -> None:
    server.settimeout(10)
    try:
        conn, _ = server.accept()
        accepted.append(True)
        conn.sendall(b"hi")
        conn.close()
    except OSError:
        pass


_CONNECT = (
    "python3 -c \"import socket,sys; s=socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=3); "
    "print(s.recv(2).decode())\" {port}"
)


@needs_bwrap
def test_network_is_blocked_by_default(tmp_path: Path) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    accepted: list[bool] = []
    thread = threading.Thread(target=_serve_once, args=(server, accepted), daemon=True)
    thread.start()
    try:
        with BwrapSandbox(tmp_path / "w") as sb:
            blocked = sb.run(_CONNECT.format(port=port))
            assert blocked.exit_code != 0
            assert "refused" in blocked.stderr.lower() or "unreachable" in blocked.stderr.lower()
            assert accepted == []
        with BwrapSandbox(tmp_path / "w", network=True) as sb:  # the control: same server is reachable
            allowed = sb.run(_CONNECT.format(port=port))
        assert allowed.exit_code == 0, allowed.stderr
        assert allowed.stdout.strip() == "hi"
    finally:
        server.close()
        thread.join(timeout=5)


@needs_bwrap
def test_writes_outside_work_dir_fail(tmp_path: Path) -> None:
    outside = tmp_path / "host"
    outside.mkdir()
    victim = outside / "keep.txt"
    victim.write_text("original\n")
    with BwrapSandbox(tmp_path / "work", ro_binds=[outside]) as sb:
        assert sb.run(f"cat '{victim}'").stdout == "original\n"  # readable through ro_binds
        for target in (str(victim), f"{outside}/new.txt", "/usr/qitos_probe", "/etc/passwd", "/qitos_probe"):
            result = sb.run(f"echo pwned > '{target}'")
            assert result.exit_code != 0, target
            assert "read-only" in result.stderr.lower() or "denied" in result.stderr.lower(), result.stderr
        assert sb.run(f"rm -f '{victim}'").exit_code != 0
        assert sb.run("mount -o remount,rw /usr").exit_code != 0
    assert victim.read_text() == "original\n"
    assert not (outside / "new.txt").exists()
    assert not Path("/usr/qitos_probe").exists() and not Path("/qitos_probe").exists()


@needs_bwrap
def test_tmp_is_private_per_instance(tmp_path: Path) -> None:
    marker = f"qitos-sbx-{time.time_ns()}"
    with BwrapSandbox(tmp_path / "a") as first, BwrapSandbox(tmp_path / "b") as second:
        assert first.run(f"echo 1 > /tmp/{marker}").exit_code == 0
        assert first.run(f"cat /tmp/{marker}").stdout == "1\n"  # persists across commands
        assert second.run(f"test -e /tmp/{marker}").exit_code == 1  # not shared between sandboxes
        scratch = first._scratch
    assert not Path("/tmp", marker).exists()  # never reached the host /tmp
    assert not scratch.exists()  # close() removed the private /tmp and home


@needs_bwrap
def test_timeout_kills_runaway_command_and_children(box: BwrapSandbox) -> None:
    command = (
        "(sleep 2; echo late > /task/child.txt) & "
        "setsid sh -c 'sleep 2; echo late > /task/orphan.txt' & "
        "while true; do :; done"
    )
    start = time.monotonic()
    result = box.run(command, timeout_seconds=1)
    elapsed = time.monotonic() - start
    assert result.timed_out and result.exit_code is None
    assert elapsed < 2.0, elapsed
    time.sleep(2.5)
    assert not (box.work_dir / "child.txt").exists()
    assert not (box.work_dir / "orphan.txt").exists()


@needs_bwrap
def test_background_process_does_not_outlive_command(box: BwrapSandbox) -> None:
    result = box.run("(sleep 1; echo late > /task/bg.txt) & echo started")
    assert result.exit_code == 0 and result.stdout == "started\n"
    assert result.duration_seconds < 1.0
    time.sleep(1.5)
    assert not (box.work_dir / "bg.txt").exists()


@needs_bwrap
def test_timeout_keeps_output_produced_before_the_kill(box: BwrapSandbox) -> None:
    result = box.run("echo before; sleep 30", timeout_seconds=0.5)
    assert result.timed_out and result.stdout == "before\n"


@needs_bwrap
def test_output_is_capped_and_flagged(tmp_path: Path) -> None:
    with BwrapSandbox(tmp_path / "w", max_output_bytes=1000) as sb:
        result = sb.run("head -c 500000 /dev/zero | tr '\\0' a; head -c 3000 /dev/zero | tr '\\0' b >&2; echo done > f")
        assert result.exit_code == 0  # the command was drained, not blocked, and finished
        assert result.stdout == "a" * 1000 and result.stderr == "b" * 1000
        assert result.truncated
        assert (sb.work_dir / "f").read_text() == "done\n"
        small = sb.run("echo ok")
        assert not small.truncated and small.stdout == "ok\n"


@needs_bwrap
def test_bad_arguments_and_setup_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ro_binds"):
        BwrapSandbox(tmp_path / "w", ro_binds=[tmp_path / "missing"])
    with pytest.raises(ValueError, match="timeout_seconds"):
        BwrapSandbox(tmp_path / "w", timeout_seconds=0)
    gone = tmp_path / "gone"
    gone.mkdir()
    sb = BwrapSandbox(tmp_path / "w", ro_binds=[gone])
    gone.rmdir()
    with pytest.raises(SandboxSetupError, match="bwrap could not set up"):
        sb.run("true")
    sb.close()
    with pytest.raises(SandboxSetupError, match="after close"):
        sb.run("true")


def test_missing_bwrap_is_reported_with_install_hint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    sandbox_module._probe.cache_clear()
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda _name: None)
    try:
        ok, reason = BwrapSandbox.available()
        assert not ok and "apt install bubblewrap" in reason
        with BwrapSandbox(tmp_path / "w") as sb, pytest.raises(SandboxUnavailable, match="bubblewrap"):
            sb.run("true")
    finally:
        monkeypatch.undo()
        sandbox_module._probe.cache_clear()


def test_failing_namespace_probe_names_the_feature(monkeypatch: pytest.MonkeyPatch) -> None:
    sandbox_module._probe.cache_clear()
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda _name: "/usr/bin/bwrap")
    def fake_probe(_bwrap: str, args: tuple[str, ...]) -> tuple[bool, str]:
        return (False, "bwrap: setting up uid map: Permission denied") if "--uid" in args else (True, "")

    monkeypatch.setattr(sandbox_module, "_run_probe", fake_probe)
    try:
        ok, reason = BwrapSandbox.available()
        assert not ok and "user namespaces" in reason and "Permission denied" in reason
    finally:
        monkeypatch.undo()
        sandbox_module._probe.cache_clear()
