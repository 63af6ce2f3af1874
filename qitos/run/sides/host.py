"""Starting and talking to the agent host, from the scoring side.

One host per batch (per scoring process): started by exec, so it holds nothing of this process's
memory; confined by `confine.host_argv` when bubblewrap works here, otherwise an unconfined child
process (and the run's `agent_isolated` check fails, saying why). Each job gets its own socket,
passed to the host, which forks a fresh child to run it; the host reports on its control socket how each
job's process ended (`ended`), the evidence for a job whose socket closed without an outcome.

A host belongs to one scoring process: the one that started it, or a `--workers` process that adopted it at the
fork (`hand_over`, `adopt`, `release`); a confined host's keeper (`keeper.py`) ends it when that owner ends.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from qitos.run.lifetime import die_with_parent
from qitos.run.sides import pycache
from qitos.run.sides.confine import confinement_status, host_argv, python_paths
from qitos.run.sides.wire import Channel

START_TIMEOUT_SECONDS = 60
# modules every job needs, imported once by the host so a job's child starts warm
WARM_MODULES = ["qitos.run.sides.agent", "qitos.core.engine", "qitos.core.parsers", "qitos.models.registry",
                "pydantic", "qitos.run.sides.signal_guard", "pyseccomp"]
# and when the agent side builds its own OpenAI-compatible client (about a second to import, once)
WARM_CLIENT_MODULES = ["qitos.models.openai_compat", "openai", "httpx"]
# environment variables the agent side gets from the host's (besides the model key's variable)
PASSED_ENV = ("LANG", "LC_ALL", "TZ", "OPENAI_BASE_URL", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy",
              "https_proxy", "no_proxy", "DISPLAY", "QITOS_WEB_SEARCH", "QITOS_NET_ALLOW_LOOPBACK")


class AgentHostError(RuntimeError):
    """The agent host could not be started (the run cannot go on safely)."""


@dataclass
class HostSettings:
    """What the agent side may see and reach."""

    network: bool = False
    extra_ro: list[str] = field(default_factory=list)  # e.g. the tokenizer cache, a task's X socket
    # the --runner's import root as the scoring side copied it (copy, live root, top-level names): see code_snapshot
    snapshot: tuple[str, str, list[str]] | None = None
    hidden: list[str] = field(default_factory=list)  # data dir, tasks file, results file, trace dir
    env: dict[str, str] = field(default_factory=dict)
    pythonpath: list[str] = field(default_factory=list)
    warm: list[str] = field(default_factory=list)
    confine: bool = True  # False: QITOS_AGENT_CONFINE=0, for debugging an agent (its runs are never official)
    processes: str = "task"  # "task": a fresh process per task; "batch": tasks on threads of one agent process


class AgentHost:
    def __init__(self, settings: HostSettings) -> None:
        self.settings = settings
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._log = tempfile.TemporaryFile(prefix="qitos-agent-host-")
        self._generation = 0  # host processes started so far; a job is (generation, number)
        self._jobs = 0  # jobs sent to the current host process (the host numbers them the same way)
        self._ends: dict[int, list[dict]] = {}  # generation -> how its jobs' processes ended (the host's reports)
        self._gone: set[int] = set()  # generations whose host process is gone (its control socket closed)
        self._ended = threading.Condition()
        ok, why, private = confinement_status()
        self.confined = ok and settings.confine
        self.private_mounts = self.confined and private and settings.processes == "task"
        # how jobs run in the host: a fresh child each with a private /tmp ("task"), a fresh child sharing /tmp
        # (no mount namespaces here, or unconfined), or threads of the host ("batch")
        self.mode = "batch" if settings.processes == "batch" else ("task" if self.private_mounts else "task-shared-tmp")
        if not settings.confine:
            why = "confinement switched off (QITOS_AGENT_CONFINE=0)"
        per_job = {"task": "a fresh process per task with a private /tmp and /dev/shm, read-only elsewhere, and "
                           "per-task limits",
                   "task-shared-tmp": "a fresh process per task; tasks share /tmp (no mount namespace per task here)",
                   "batch": "tasks on threads of one agent process (--agent-processes batch): they share its memory "
                            "and can reach each other's work dirs"}[self.mode]
        self.isolation_detail = (
            (f"agent side in a separate process confined by {why} (own PID namespace, no data dir, tasks, results "
             f"or traces; network {'shared' if settings.network else 'off'}; {per_job}; {guard_detail()})")
            if self.confined else f"agent side in a separate but unconfined process: {why}; {per_job}")

    def warm_modules(self) -> list[str]:
        return [*WARM_MODULES, *self.settings.warm]

    def pythonpath(self) -> list[str]:
        """The agent side's import path: the runner's root, then the directory holding the qitos package this
        process runs (a checkout on PYTHONPATH, a worktree), so the agent side imports the same code, not whatever
        an editable install's finder points at (not mounted there)."""
        import qitos

        return [*self.settings.pythonpath, str(Path(qitos.__file__).resolve().parent.parent)]

    def pycache(self) -> str:
        """The host's read-only bytecode folder (PYTHONPYCACHEPREFIX, see `pycache`), built here once."""
        if self._pycache is None:  # built with QitOS's directory alone on the path: never the runner's modules
            self._pycache = pycache.prefix(self.warm_modules(), self.pythonpath()[-1:])
        return self._pycache

    _pycache: str | None = None

    def bwrap_options(self) -> list[str]:
        """The confinement's options for these settings, as the filesystem is now (masks depend on what exists)."""
        return [*host_argv(python_ro=[*python_paths(), self.pycache()], extra_ro=self.settings.extra_ro,
                           hidden=self.settings.hidden,
                           network=self.settings.network, private_mounts=self.private_mounts,
                           snapshot=self.settings.snapshot)[1:], "--chdir", "/tmp"]

    def serves(self, settings: HostSettings) -> bool:
        """Would a host started with `settings` now be this one (same view, same environment)? Then keep it."""
        other = AgentHost(settings)
        return (other.confined == self.confined and other.settings.env == self.settings.env
                and other.settings.pythonpath == self.settings.pythonpath
                and (not self.confined or other.bwrap_options() == self._options))

    _options: list[str] | None = None

    def _start(self) -> None:
        self._spawn()
        self._await_ready()

    def spawn(self) -> "AgentHost":
        """Start the host process and return at once (it imports while the caller goes on): a worker's host,
        started during planning and adopted by that worker after the fork (`hand_over`, `adopt`)."""
        with self._lock:
            if self._pending is None and self._control is None:
                self._spawn()
        return self

    _pending: socket.socket | None = None  # the control socket of a host spawned, not yet ready
    _adopted = False  # started by the process this one was forked from (not this process's child)
    _reader: threading.Thread | None = None
    _stop_reading: int | None = None  # a pipe's write end: the reader thread stops (before a fork)
    _lifeline: int | None = None  # the keeper's lifeline's write end (keeper.py)

    def _spawn(self) -> None:
        self._close_lifeline()  # a former host process's (it died)
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        warm = self.warm_modules()
        command = [sys.executable, "-m", "qitos.run.sides.zygote", str(theirs.fileno()),
                   self.mode, *warm]
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp/home", "PYTHONDONTWRITEBYTECODE": "1",
               "QITOS_AGENT_SIDE": "1", **{k: os.environ[k] for k in PASSED_ENV if k in os.environ},
               **self.settings.env}
        env["PYTHONPYCACHEPREFIX"] = self.pycache()  # no bytecode beside any source is read
        pythonpath = self.pythonpath()
        if self.settings.snapshot is not None and not self.confined:  # no mount in place: import the copy itself
            pythonpath = [self.settings.snapshot[0] if p == self.settings.snapshot[1] else p for p in pythonpath]
        env["PYTHONPATH"] = os.pathsep.join(pythonpath)
        passed = [theirs.fileno()]
        files: list = []
        if self.confined:
            # bwrap reads its options from a file: its command line (the agent's /proc/1/cmdline) then names no
            # masked path (data dir, tasks file, results, traces); the keeper reads bwrap's command line likewise
            opts = self._options = self.bwrap_options()
            options = _nul_file([*opts], "qitos-agent-bwrap-")
            keeper = _nul_file(["bwrap", "--args", str(options.fileno()), "--", *command], "qitos-agent-keeper-")
            files = [options, keeper]
            passed += [options.fileno(), keeper.fileno()]
            # the keeper's lifeline: its write end stays in the host's owner alone (see keeper.py)
            lifeline, self._lifeline = os.pipe()
            passed.append(lifeline)
            argv = [sys.executable, "-I", "-S", str(Path(__file__).with_name("keeper.py")), str(keeper.fileno()),
                    str(lifeline)]
            cwd = None
        else:
            argv, cwd = command, tempfile.gettempdir()
        try:
            # its own session: a terminal's Ctrl-C (or `timeout`, a batch scheduler) signals the runner's process
            # group, and the runner cancels each job through its socket; the keeper ends the confined host's
            # process group when its owner dies (`keeper.py`), and PR_SET_PDEATHSIG ends an unconfined host
            self._proc = subprocess.Popen(argv, pass_fds=passed, env=env, cwd=cwd, start_new_session=True,
                                          stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                          preexec_fn=None if self.confined else die_with_parent)
        finally:
            theirs.close()
            for handle in files:
                handle.close()
            if self.confined:
                os.close(lifeline)
        self._pending = control

    def _await_ready(self, read: bool = True) -> None:
        control, self._pending = self._pending, None
        assert control is not None
        control.settimeout(START_TIMEOUT_SECONDS)
        try:
            ready = control.recv(1)
        except OSError:
            ready = b""
        if ready != b"R":
            self._end_group()
            raise AgentHostError(f"the agent host did not start: {self.log_tail() or 'no output'}")
        control.settimeout(None)
        self._control = control
        self._generation += 1
        self._jobs = 0
        if read:
            self._start_reader()

    def _start_reader(self) -> None:
        if self._stop_reading is not None:  # a former host process's reader (it died): it ends too
            os.close(self._stop_reading)
        stop, self._stop_reading = os.pipe()
        self._reader = threading.Thread(target=self._read_ends, args=(self._control, self._generation, stop),
                                        name="qitos-agent-host-ends", daemon=True)
        self._reader.start()

    def hand_over(self) -> None:
        """Before a fork whose child adopts this host: ready, and this process no longer reads its reports."""
        with self._lock:
            if self._pending is not None:
                self._await_ready(read=False)
            if self._reader is not None and self._stop_reading is not None:
                os.write(self._stop_reading, b"x")
                self._reader.join()
                os.close(self._stop_reading)
                self._reader = self._stop_reading = None

    def adopt(self) -> "AgentHost":
        """In the forked child: the host is this process's now (it reads the reports and sends the jobs)."""
        self._lock, self._ended = threading.Lock(), threading.Condition()
        self._ends, self._gone, self._adopted = {}, set(), True
        if self._control is not None:  # else it starts on first use, as this process's own
            self._start_reader()
        else:
            self._adopted, self._proc = False, None
        return self

    def release(self) -> None:
        """In a process that is not the host's owner (the parent after the fork, a sibling worker): drop this
        process's copy of its control socket, so the host ends when its one owner does."""
        for sock in (self._control, self._pending):
            if sock is not None:
                sock.close()
        self._close_lifeline()
        self._control = self._pending = self._proc = None

    def _close_lifeline(self) -> None:
        if self._lifeline is not None:
            os.close(self._lifeline)
            self._lifeline = None

    def _alive(self) -> bool:
        if self._proc is None or self._control is None:
            return False
        if self._adopted:  # not this process's child: its control socket says whether it is there
            return self._generation not in self._gone
        return self._proc.poll() is None

    def _read_ends(self, control: socket.socket, generation: int, stop: int) -> None:
        """The host's reports of its children's ends: `E{"first", "last", "signal", "code"}` lines, one per child.
        A byte on `stop` ends the reading, the host untouched (handed over to a forked process)."""
        import json
        import select

        buffer = b""
        try:
            while True:
                if stop in select.select([control, stop], [], [])[0]:
                    if os.read(stop, 1):  # handed over: the host goes on, read by another process
                        os.close(stop)
                        return
                    break  # this side's end closed (`close`)
                data = control.recv(65536)
                if not data:
                    break
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    if line.startswith(b"E"):
                        with self._ended:
                            self._ends.setdefault(generation, []).append(json.loads(line[1:]))
                            self._ended.notify_all()
        except (OSError, ValueError):
            pass
        os.close(stop)
        with self._ended:
            self._gone.add(generation)
            self._ended.notify_all()

    def ended(self, job: tuple[int, int], timeout: float) -> dict | None:
        """How the process that ran `job` ended ({"signal": n or None, "code": n or None}), as the host saw it
        reaping it; None when the host is gone or has not said so within `timeout` seconds (still running)."""
        generation, number = job

        def report() -> dict | None:
            return next((e for e in self._ends.get(generation, []) if e["first"] <= number <= e["last"]), None)

        with self._ended:
            self._ended.wait_for(lambda: report() is not None or generation in self._gone, timeout)
            return report()

    def log_tail(self, limit: int = 2000) -> str:
        self._log.flush()
        self._log.seek(0)
        return self._log.read().decode("utf-8", "replace")[-limit:].strip()

    def open_job(self) -> Channel:
        """A socket to a fresh child of the host (started on first use, restarted if it died)."""
        with self._lock:
            if self._pending is not None:
                self._await_ready()
            elif not self._alive():
                self._start()
            ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
            ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)  # the job child's pid (watch.read_hello)
            try:
                assert self._control is not None
                socket.send_fds(self._control, [b"J"], [theirs.fileno()])
            except OSError as exc:
                ours.close()
                raise AgentHostError(f"the agent host stopped taking jobs: {exc}; {self.log_tail()}") from None
            finally:
                theirs.close()
            channel = Channel(ours)
            channel.job = (self._generation, self._jobs)  # type: ignore[attr-defined]
            self._jobs += 1
        return channel

    def close(self) -> None:
        with self._lock:
            if self._control is not None:
                try:  # the host sees the end at once (a close alone would wait for the reader thread's recv)
                    self._control.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self._control.close()
                self._control = None
            if self._pending is not None:  # spawned, never used: it ends when its control socket closes
                self._pending.close()
                self._pending = None
            if self._proc is not None and self._adopted:  # not ours to wait for: it ends with its control socket
                self._proc = None
            if self._proc is not None:
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self._end_group()
                    self._proc.wait()
                self._proc = None
            if self._stop_reading is not None:
                os.close(self._stop_reading)
                self._stop_reading = None
            self._close_lifeline()  # the keeper ends whatever is left of the host's group

    def _end_group(self) -> None:
        """Kill the host's process group (its own session): the keeper, bwrap and all that is not yet in the
        sandbox's own session (see `keeper.py`), the host itself when unconfined."""
        assert self._proc is not None
        try:
            os.killpg(self._proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            self._proc.kill()


def _nul_file(items: list[str], prefix: str):
    """An unnamed file holding `items` NUL-separated, at its start (a command line passed by descriptor)."""
    handle = tempfile.TemporaryFile(prefix=prefix)
    handle.write(b"".join(item.encode() + b"\0" for item in items))
    handle.seek(0)
    return handle


def guard_detail() -> str:
    """What `signal_guard` holds on this kernel, for the run's isolation check."""
    from qitos.run.sides.signal_guard import landlock_abi

    scope = ("nor another task's (Landlock signal scope)" if landlock_abi() >= 6 else
             "but may signal another task's on this kernel (no Landlock signal scope before Linux 6.12)")
    return f"a task's processes cannot signal its own agent process, the host or init (seccomp), {scope}"


def runner_root(runner: str) -> tuple[str | None, str | None]:
    """(the sys.path entry holding the `--runner`'s top-level module or package, its file) without importing it."""
    top = runner.partition(":")[0].split(".")[0]
    for entry in ["", *sys.path]:
        base = Path(entry or os.getcwd())
        for candidate in (base / top / "__init__.py", base / f"{top}.py"):
            if candidate.is_file():
                return str(base.resolve()), str(candidate.resolve())
    return None, None
