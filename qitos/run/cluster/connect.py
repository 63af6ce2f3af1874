"""Connecting to Ray: a cluster at `--ray-address`, or a local instance that qit starts (and stops) itself."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
from pathlib import Path
from typing import Iterator

from qitos.benchmark.errors import BenchmarkUsageError

RAY_FIX = ("start a head with `ray start --head --port 6379` and pass the address it prints "
           "(e.g. --ray-address 127.0.0.1:6379), or leave out --ray-address to start a local Ray")
RAY_AUTH_FIX = ("the cluster uses Ray token authentication: export RAY_AUTH_TOKEN=<the cluster's token> "
                "(or put it in ~/.ray/auth_token) and RAY_AUTH_MODE=token")
PLENTY = 1000.0  # what a local instance advertises of a resource this machine has: --concurrency bounds the use


def ray_log(output: Path) -> Path:
    """The run's Ray log, beside its results: `<output>.ray.log`."""
    return output.with_name(output.name + ".ray.log")


def local_resources() -> dict[str, float]:
    """The custom resources a local Ray started by qit advertises: what this machine can run.

    On a cluster each node says so itself (`ray start --resources '{"docker": 1, "osworld_vm": 4}'`)."""
    found: dict[str, float] = {}
    if shutil.which("docker") and (Path("/var/run/docker.sock").exists() or os.environ.get("DOCKER_HOST")):
        found.update(docker=PLENTY, osworld_vm=PLENTY)
    if Path("/dev/kvm").exists():
        found["kvm"] = PLENTY
    return found


def _probe(address: str) -> str | None:
    """Why nothing answers at `host:port` (None when something does): Ray itself retries for minutes."""
    import socket

    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return None  # "auto", ray:// client addresses: left to Ray
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=3).close()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _use_local_token() -> None:
    """Send this machine's Ray token when one exists, as Ray does for clusters it finds itself.

    Ray (2.5x and later) starts `ray start --head` clusters with token authentication once a token exists
    (~/.ray/auth_token), but a driver given an explicit address connects without it and fails with
    "Failed to connect to Ray cluster". A driver sending a token still connects to a cluster without auth.
    RAY_AUTH_MODE set by the user wins.
    """
    if "RAY_AUTH_MODE" in os.environ:
        return
    try:
        from ray._private.authentication.authentication_token_setup import (
            maybe_enable_token_auth_if_token_available,
        )
    except ImportError:  # an older Ray: no token authentication
        return
    maybe_enable_token_auth_if_token_available(warn_if_disabled=False)


def _auth_refused(exc: BaseException) -> bool:
    seen: BaseException | None = exc
    while seen is not None:
        if "Authentication" in type(seen).__name__ or "InvalidAuthToken" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def connect_ray(address: str | None, log: Path | None = None) -> None:
    """Connect to (or start) Ray before anything is written; a failure is one line naming the fix.

    Without an address (and no RAY_ADDRESS) qit starts a new local instance of its own, never joining a
    cluster some other `ray start` left running on this machine; it stops with qit (its processes share
    qit's fate, SIGKILL included). With `log`, Ray's own output while connecting (its start-up messages) goes
    there, not to the terminal."""
    try:
        import ray  # first: Ray's loggers keep the stderr they find now, whose descriptor `log` then takes over
    except ImportError:
        raise BenchmarkUsageError("--executor ray needs Ray: pip install 'qitos[ray]'") from None
    if ray.is_initialized():
        return
    with native_stderr_to(log) if log is not None else contextlib.nullcontext():
        _connect(ray, address)


def _connect(ray, address: str | None) -> None:
    address = address or os.environ.get("RAY_ADDRESS") or None
    where = f"--ray-address {address}" if address else "--executor ray (local Ray)"
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")  # failed jobs are reported here, in one line
    extra: dict = {}
    if address:
        problem = _probe(address)
        if problem:
            raise BenchmarkUsageError(f"{where}: cannot connect to Ray (nothing answers there: {problem}); {RAY_FIX}")
        _use_local_token()
    else:
        extra["resources"] = local_resources()
        extra["_node_ip_address"] = "127.0.0.1"  # a Ray of qit's own serves this machine only: loopback
    handlers = _stop_handlers()
    try:
        ray.init(address=address or "local", ignore_reinit_error=True, log_to_driver=False, include_dashboard=False,
                 **extra)
    except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ValueError, ...
        reason = " ".join(str(exc).split())[:200] or type(exc).__name__
        fix = RAY_AUTH_FIX if _auth_refused(exc) else RAY_FIX
        raise BenchmarkUsageError(f"{where}: cannot connect to Ray ({reason}); {fix}") from None
    finally:
        _restore(handlers)
    if not address:
        from qitos.run.cluster.guard import start

        start()  # the local instance's processes end with qit, even when qit is SIGKILLed


def _stop_handlers() -> dict:
    """qit's SIGTERM/SIGHUP handlers (Ctrl-C's path), which `ray.init` replaces by an immediate `sys.exit`."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return {}
    return {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}


def _restore(handlers: dict) -> None:
    import signal

    for sig, handler in handlers.items():
        if handler is not None and signal.getsignal(sig) is not handler:
            signal.signal(sig, handler)


@contextlib.contextmanager
def native_stderr_to(log: Path) -> Iterator[None]:
    """Ray's own output (its C++ core worker's state dumps when a raylet dies, its loggers) goes to `log`, not the
    terminal: file descriptor 2 points at the log while qit's own messages (`sys.stderr`, looked up when written)
    still reach the terminal through a copy of the original descriptor."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (e.g. captured in a test): nothing to keep clean
        yield
        return
    terminal, original = os.fdopen(os.dup(saved), "w", buffering=1, encoding=getattr(sys.stderr, "encoding", None)
                                   or "utf-8", errors="replace"), sys.stderr
    log.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stderr = terminal
    try:
        yield
    finally:
        terminal.flush()
        sys.stderr = original
        os.dup2(saved, 2)
        os.close(saved)
        terminal.close()
