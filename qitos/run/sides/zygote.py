"""The agent host: a warm process that forks one fresh child per job. Runs inside the confinement.

`python -m qitos.run.sides.zygote <control fd> <warm module>...` imports the engine, the
benchmark's recipes and the `--runner` module once, then waits on its control socket. Each job's
socket arrives as a passed file descriptor; the host forks, and the child:

1. (task mode) enters a mount namespace of its own and becomes a subreaper (`task_ns`): `/tmp` (its work
   dir, home and TMPDIR) and `/dev/shm` are fresh tmpfs mounts while `/`, `/dev` and the rest are read-only,
   so no sibling job sees anything it writes, and what it starts stays in its process tree;
2. says hello (the scoring side reads its pid from the socket's credentials and places the task's
   processes under their limits), then reads its job;
3. sets its per-process limits (file size, CPU time), makes itself non-dumpable, drops every capability
   (the host keeps CAP_SYS_ADMIN in its own user namespace only for step 1), sets no_new_privs and installs
   the signal guard (`signal_guard`: it cannot signal itself, the host or init);
4. runs the job (`agent.run_agent_job`) and exits.

The host never reads a job and runs no agent code: tasks go straight to the child that runs them. It reaps
its children and tells the scoring side, on its control socket, how each job's process ended (exit code or
signal, by job number): the scoring side's evidence when a job's socket closes without an outcome.

`batch` mode trades that per-task freshness for throughput: the host forks one batch process (guarded like a
task's child) and hands it every job, which it runs on a thread (reused from job to job), in a work dir of its own
(`/tmp/work/<random>`), sharing one model client. Tasks of a batch can then reach each other's work dirs,
files in /tmp and /dev/shm, and memory (never gold, which is not in the process), and no per-task limit on memory,
processes, file size or CPU time applies (only the streamed-asset quotas). The RunSpec records the mode.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import sys
import traceback
from pathlib import Path
from typing import Any

from qitos.run.sides.ends import Reaper
from qitos.run.sides.link import _Link, _Outbox
from qitos.run.sides.job_threads import JOB_THREADS

_libc = ctypes.CDLL(None, use_errno=True)
PR_SET_DUMPABLE, PR_SET_NO_NEW_PRIVS, PR_CAPBSET_DROP = 4, 38, 24
WORK = Path("/tmp/work")
DONE_WAIT_SECONDS = 10.0


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def isolate_child(private_mounts: bool) -> None:
    """Non-dumpable, no capabilities (task mode: after `task_ns` set up the task's world), no new privileges."""
    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    if private_mounts:
        for cap in range(64):
            if _libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() == 22:  # EINVAL: past the last
                break
        header, data = _CapHeader(0x20080522, 0), (_CapData * 2)()
        _check(_libc.syscall(126 if os.uname().machine == "x86_64" else 91, ctypes.byref(header), data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def _hello(sock: socket.socket) -> None:
    """The job's first byte: the scoring side reads this process's pid from its credentials (SO_PASSCRED) to
    place the task's processes under their limits before it sends the job."""
    sock.sendall(b"P")


def _receive_job(channel: Any) -> Any:
    from qitos.benchmark.contract import AgentJob

    first = channel.recv()
    if not first or first.get("t") != "job":
        raise ConnectionError("the scoring side sent no job")
    return AgentJob.model_validate(first["job"])


def _child(sock: socket.socket, private_mounts: bool) -> int:
    """A fresh process for one job: with private writable places (task mode), under its limits, without
    privileges; then run the job in its work dir."""
    from qitos.run.sides import signal_guard, task_ns
    from qitos.run.sides.wire import Channel

    channel = Channel(sock)  # one reader for the job's life: it may hold the bytes of the next message
    try:
        _hello(sock)
        if private_mounts:
            task_ns.enter()
        job = _receive_job(channel)
        if private_mounts:
            task_ns.private_world(int(job.limits.get("memory_bytes") or 1 << 30))
        isolate_child(private_mounts)
        if job.limits:
            task_ns.set_rlimits(job.limits, memory_rlimit=bool(job.limits.get("rlimit_memory")))
        signal_guard.install()
    except (OSError, ValueError) as exc:
        return _failed(sock, exc)
    import secrets
    import tempfile

    workdir = WORK if private_mounts else WORK / secrets.token_hex(16)  # shared /tmp: a dir of its own by name
    workdir.mkdir(mode=0o700, exist_ok=True)
    for sub in ("home", "tmp"):
        (workdir / sub).mkdir(exist_ok=True)
    os.environ["HOME"] = str(workdir / "home")
    os.environ["TMPDIR"] = str(workdir / "tmp")
    tempfile.tempdir = None  # recomputed from TMPDIR
    os.chdir(workdir)
    try:
        return _run_job(channel, job, workdir)
    finally:
        if workdir != WORK:
            import shutil

            shutil.rmtree(workdir, ignore_errors=True)


def _run_job(channel: Any, job: Any, workdir: Path) -> int:
    from qitos.run.sides.agent import run_agent_job

    link = outbox = None
    try:
        outbox = _Outbox(channel, calls_follow_requests=job.proxied_model is not None)
        link = _Link(channel, outbox)
        link.start()
        outcome = run_agent_job(job, link, outbox.put, workdir, link.cancel)
        outbox.send_with({"t": "done", "outcome": outcome.model_dump(mode="json")})  # with the trace's last records
        link.wait_closed(DONE_WAIT_SECONDS)
        return 0
    except BaseException as exc:  # noqa: BLE001 - the scoring side records why the agent side failed
        if outbox is not None:
            try:
                outbox.flush()  # what the run recorded before it failed (its `finalize`, say) reaches the trace
            except Exception:  # noqa: BLE001 - the connection is gone: nothing more to send
                pass
        return _failed(channel.sock, exc)
    finally:
        if link is not None:
            link.stop()
        channel.close()


def _failed(sock: socket.socket, exc: BaseException) -> int:
    from qitos.benchmark.contract import AgentOutcome
    from qitos.run.sides.wire import Channel

    try:
        Channel(sock).send({"t": "done", "outcome": AgentOutcome(
            stop_reason="error", error=f"{type(exc).__name__}: {exc}",
            failure={"type": type(exc).__name__, "message": str(exc),
                     "traceback": traceback.format_exc()}).model_dump(mode="json")})
    except Exception:  # noqa: BLE001 - the connection is gone: nothing more to say
        pass
    return 1


def _pooled_job(sock: socket.socket) -> None:
    """`batch` mode: one job on a thread of this process, in a work dir of its own (by path, not by mount)."""
    import secrets
    import shutil

    from qitos.run.sides.wire import Channel

    workdir = WORK / secrets.token_hex(16)
    workdir.mkdir(mode=0o700)
    try:
        _hello(sock)
        channel = Channel(sock)
        _run_job(channel, _receive_job(channel), workdir)
    except (OSError, ValueError) as exc:
        _failed(sock, exc)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def _in_child(control: socket.socket, reaper: Reaper) -> None:
    """A freshly forked child of the host: nothing of the host's signal handling or control socket."""
    signal.set_wakeup_fd(-1)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the scoring side cancels through the job socket
    os.close(reaper.wake_r)
    os.close(reaper.wake_w)
    control.close()


def _batch_process(jobs: socket.socket) -> int:
    """`batch` mode's one agent process: guarded, then each job received from the host on a thread."""
    from qitos.run.sides import signal_guard

    try:
        isolate_child(private_mounts=False)
        signal_guard.install()
    except OSError as exc:
        guard_failure: OSError | None = exc
    else:
        guard_failure = None
    while True:
        try:
            _, fds, _, _ = socket.recv_fds(jobs, 16, 1)
        except OSError:
            return 0
        if not fds:
            return 0
        sock = socket.socket(fileno=fds[0])
        if guard_failure is not None:  # run no agent code unguarded: every job says why
            _hello(sock)
            _failed(sock, guard_failure)
            sock.close()
            continue
        JOB_THREADS.run(_pooled_job, sock)


def _start_batch(control: socket.socket, reaper: Reaper) -> tuple[int, socket.socket]:
    """Fork the batch process; (its pid, the socket its jobs go through)."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    pid = os.fork()
    if pid == 0:
        _in_child(control, reaper)
        ours.close()
        os._exit(_batch_process(theirs))
    theirs.close()
    return pid, ours


def serve(control_fd: int, warm: list[str], mode: str) -> None:
    """Run each job socket received on the control socket: a forked child per job (`task`, `task-shared-tmp`),
    or a thread of the one batch process (`batch`). Exit when the control socket closes."""
    import importlib
    import select

    _check(_libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")  # no job can read or write it
    pooled = mode == "batch"
    for name in warm:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the job that needs it reports the import error itself
            pass
    from qitos.spec.provenance import environment_summary, qitos_checkout

    qitos_checkout(), environment_summary("local")  # computed once here, inherited by every child
    if "qitos.models.openai_compat" in warm:  # the agent side builds its own client: warm what each child would
        from qitos.models.openai_compat import OpenAICompatModel, shared_ssl_context

        shared_ssl_context()  # the CA store, loaded once
        client = OpenAICompatModel("warm", base_url="http://127.0.0.1:9/v1")._get_client()  # the SDK's lazy imports
        client.default_headers  # its platform headers (the OS name comes from a subprocess), cached once here
    import gc

    gc.freeze()
    WORK.mkdir(parents=True, exist_ok=True)  # each child mounts its own empty tmpfs here (task mode)
    control = socket.socket(fileno=control_fd)
    reaper = Reaper(control)
    batch: tuple[int, socket.socket] | None = None  # (pid, its job socket) in batch mode
    number = 0  # jobs received so far: the scoring side numbers them the same way
    control.send(b"R")  # ready
    while True:
        try:
            ready, _, _ = select.select([control, reaper.wake_r], [], [])
        except InterruptedError:
            continue
        if reaper.wake_r in ready:
            reaper.reap()
            if batch is not None and batch[0] not in reaper.jobs:
                batch[1].close()
                batch = None
        if control not in ready:
            continue
        try:
            _, fds, _, _ = socket.recv_fds(control, 16, 1)
        except OSError:
            return
        if not fds:
            return  # the scoring side closed the control socket
        job, number = number, number + 1
        if pooled:
            for _ in range(2):  # a batch process that died since the last job (not reaped yet): a fresh one
                if batch is None:
                    batch = _start_batch(control, reaper)
                try:
                    socket.send_fds(batch[1], [b"J"], [fds[0]])
                except OSError:
                    batch[1].close()
                    batch = None
                    continue
                reaper.jobs.setdefault(batch[0], [job, job])[1] = job  # its end, when it comes, is this job's too
                break
            os.close(fds[0])
            continue
        pid = os.fork()
        if pid == 0:
            _in_child(control, reaper)
            code = _child(socket.socket(fileno=fds[0]), mode == "task")
            sys.stdout.flush()
            os._exit(code)
        reaper.jobs[pid] = [job, job]
        os.close(fds[0])


if __name__ == "__main__":
    serve(int(sys.argv[1]), [a for a in sys.argv[3:]], sys.argv[2])
