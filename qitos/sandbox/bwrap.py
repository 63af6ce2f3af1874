"""A bubblewrap (bwrap) sandbox for running untrusted shell commands from agents and oracles.

Why bwrap: it needs no daemon (unlike Docker), starts in milliseconds, and gives us the three
guarantees benchmarks need: the host filesystem stays read-only, the network is off unless asked
for, and a time limit kills every process the command started.

Layout inside the sandbox (documented contract, other modules rely on it):

- ``/task``: the caller's ``work_dir``, read-write, and the working directory of every command (unless
  ``work_alias`` names a second mount of it, under ``/tmp``, to run them in).
  It is the only place whose contents survive on the host.
- ``/tmp`` and ``/home/sandbox`` (``$HOME``): private to one ``BwrapSandbox`` instance; they
  persist across ``run()`` calls of that instance and are deleted by ``close()`` (or garbage
  collection). Nothing there is visible to the host user except through this object.
- ``/usr`` (and ``/bin``, ``/sbin``, ``/lib*`` mirrored as on the host), a minimal ``/etc``
  (dynamic linker, alternatives, certificates, time zone, ...), and ``ro_binds`` at their host
  paths: all read-only. The host's ``/etc/profile`` is *not* visible, so ``bash -lc`` does not
  pick up host-specific login scripts or override ``PATH``.
- ``hosts`` adds ``/etc/hosts`` entries (name -> address), e.g. a benchmark's service containers;
  with ``network=True`` they replace the host's hosts file (localhost stays).
- The command runs as ``sandbox`` (uid/gid 1000) in new user, pid, ipc, uts and (by default)
  network namespaces, with every capability dropped. The network namespace holds only ``lo``.
- bwrap maps the sandbox user to the host user that started it. When that is root, files only
  root may read would become readable inside, so read-only binds are scanned once per process
  and such entries are masked (an empty file or directory): the sandbox sees what an
  unprivileged user would (``python_ro``, the interpreter and its packages, is not scanned:
  it holds no secrets, and the scan takes seconds).
- A command's background processes do not outlive it: when the command exits (or times out)
  its pid namespace is torn down, which kills everything it started.

Each of stdout and stderr keeps at most its first ``max_output_bytes`` bytes, and with ``max_output_tail_bytes``
its last bytes too (`sandbox_output.OutputCap`: cut on character boundaries, a marker in between); the rest is
read and dropped (so a chatty command does not block) and ``truncated`` is set. The decode errors are the whole
stream's. ``work_alias`` binds the work dir at a second path as well and runs commands there (CyBench: upstream's
agent dir).

Resource limits (memory, processes, file size, disk; see ``sandbox_limits``) apply to every
command. Reaching one kills the command's whole tree; the result's ``limit`` names it and a
``[sandbox] ... limit reached`` line ends its stderr, so the agent reads why.

The command's environment is exactly ``BwrapSandbox.env``: a fixed allow-list (PATH, HOME, LANG,
...) plus what the caller passes in ``env``. Nothing is inherited from the host, so no API key
reaches the command unless a caller hands it over on purpose.
"""

from __future__ import annotations

import io
import os
import shlex
import shutil
import signal
import stat
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import cast

from pydantic import BaseModel

from qitos.sandbox.limits import (CommandCgroup, DiskWatch, SandboxLimits, cgroup_support, count_tree, disk_usage,
                             limit_message, rlimit_memory_hit)
from qitos.sandbox.masks import mask_args as _mask_args
from qitos.sandbox.output import OutputCap, _CappedReader, _feed_stdin
from qitos.sandbox.probe import (_INSTALL_HINT, _ROOT_LINKS, SANDBOX_UID, SandboxUnavailable, _probe, _proc_args,
                                 _system_mounts)

WORK_MOUNT = "/task"
HOME_MOUNT = "/home/sandbox"
SANDBOX_USER = "sandbox"
SANDBOX_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# /etc entries programs commonly need; everything else in the host's /etc stays invisible.
_ETC_ENTRIES = (
    "alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "timezone",
    "nsswitch.conf", "host.conf", "gai.conf", "protocols", "services", "ssl/certs", "ca-certificates",
    "ca-certificates.conf", "os-release", "debian_version", "magic", "magic.mime", "mime.types",
)
_NETWORK_ETC_ENTRIES = ("resolv.conf", "hosts")


class SandboxResult(BaseModel):
    """Outcome of one command. `exit_code` is None when it was killed for time or for a limit (`limit`)."""

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    duration_seconds: float
    limit: str | None = None  # "memory" | "processes" | "disk" | "file_size" when a limit ended the command
    # why the output is not UTF-8 (`str` of the UnicodeDecodeError; the text above has U+FFFD there), else None
    stdout_decode_error: str | None = None
    stderr_decode_error: str | None = None


class SandboxSetupError(RuntimeError):
    """bwrap is usable but could not build this particular sandbox (e.g. a bind path vanished)."""


def remove_tree(path: Path) -> None:
    """rmtree that also removes read-only files and directories (task data is often mode 0444/0555)."""

    def _retry(func, target, _exc):  # type: ignore[no-untyped-def]
        parent = os.path.dirname(target)
        for p in (parent, target):
            try:
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IXUSR | stat.S_IRUSR)
            except OSError:
                pass
        func(target)

    if path.exists() or path.is_symlink():
        shutil.rmtree(path, onerror=_retry)


class BwrapSandbox:
    """Runs commands with `work_dir` as the writable, persistent `/task`; see the module doc."""

    def __init__(
        self,
        work_dir: Path,
        *,
        network: bool = False,
        timeout_seconds: float = 60.0,
        max_output_bytes: int = 100_000,
        ro_binds: Sequence[Path | str] = (),
        env: Mapping[str, str] | None = None,
        limits: SandboxLimits | None = None,
        hosts: Mapping[str, str] | None = None,
        max_output_tail_bytes: int = 0,
        work_alias: str | None = None,
        python_ro: Sequence[Path | str] = (),
    ) -> None:
        if timeout_seconds <= 0:
            raise ValueError(f"BwrapSandbox timeout_seconds must be > 0, got {timeout_seconds}")
        if max_output_bytes <= 0:
            raise ValueError(f"BwrapSandbox max_output_bytes must be > 0, got {max_output_bytes}")
        self.work_dir = Path(work_dir).resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.ro_binds = [Path(p).resolve() for p in ro_binds]
        # the interpreter and its packages (`sides.confine.python_paths`): read-only, never scanned for root-only
        # entries (they hold no secrets, and the scan takes seconds)
        self.python_ro = [Path(p).resolve() for p in python_ro]
        for path in [*self.ro_binds, *self.python_ro]:
            if not path.exists():
                raise ValueError(f"BwrapSandbox ro_binds: {path} does not exist on the host")
        self.network = network
        # extra /etc/hosts entries (name -> address), e.g. a benchmark's service containers
        self.hosts = dict(hosts or {})
        self.timeout_seconds = float(timeout_seconds)
        self.max_output_bytes = int(max_output_bytes)
        self.max_output_tail_bytes = max(0, int(max_output_tail_bytes))
        if work_alias is not None and (not work_alias.startswith("/tmp/") or ".." in work_alias.split("/")
                                       or work_alias.rstrip("/") == "/tmp"):
            raise ValueError(f"BwrapSandbox work_alias must be a folder under /tmp, got {work_alias!r}")
        self.work_alias = work_alias.rstrip("/") if work_alias else None
        self.env = {
            "PATH": SANDBOX_PATH, "HOME": HOME_MOUNT, "USER": SANDBOX_USER, "LOGNAME": SANDBOX_USER,
            "SHELL": "/bin/bash", "LANG": "C.UTF-8", "TERM": "dumb", "TMPDIR": "/tmp", "PYTHONUNBUFFERED": "1",
        }
        self.env.update(env or {})
        self._scratch = Path(tempfile.mkdtemp(prefix="qitos-sandbox-"))
        self._finalizer = weakref.finalize(self, remove_tree, self._scratch)
        self._write_identity_files()
        self.limits = limits or SandboxLimits.from_env()
        self._disk_baseline = disk_usage(self._disk_paths())[0]

    # -- public ---------------------------------------------------------------------------------

    @staticmethod
    def available() -> tuple[bool, str]:
        """Whether bwrap can build our sandbox here, and why not (naming the fix) when it cannot."""
        ok, reason, _ = _probe()
        return ok, reason

    def run(
        self,
        command: str | Sequence[str],
        *,
        timeout_seconds: float | None = None,
        stdin: str | None = None,
    ) -> SandboxResult:
        """Run one command in `/task`. A string goes to `bash -lc`; a sequence is an argv, run as is."""
        ok, reason, _ = _probe()
        if not ok:
            raise SandboxUnavailable(reason)
        if self._finalizer.alive is False:
            raise SandboxSetupError("BwrapSandbox.run called after close()")
        argv = ["/bin/bash", "-lc", command] if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise ValueError("BwrapSandbox.run: empty command")
        limit = self.timeout_seconds if timeout_seconds is None else float(timeout_seconds)
        if limit <= 0:
            raise ValueError(f"BwrapSandbox.run timeout_seconds must be > 0, got {limit}")
        return self._execute(argv, limit, stdin)

    def close(self) -> None:
        """Delete this sandbox's private /tmp and home. The work dir is the caller's and stays."""
        self._finalizer()

    def __enter__(self) -> BwrapSandbox:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def bwrap_args(self) -> list[str]:
        """The bwrap options (without the command); public so failures can be reproduced by hand."""
        _, _, disable_userns = _probe()
        args = [
            "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
            "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--hostname", "sandbox",
            "--cap-drop", "ALL", "--die-with-parent", "--new-session",
        ]
        if disable_userns:
            args.append("--disable-userns")
        if not self.network:
            args.append("--unshare-net")
        args += _system_mounts()
        args += [*_proc_args(), "--dev", "/dev"]
        real_dirs = [f"/{n}" for n in _ROOT_LINKS if Path(f"/{n}").is_dir() and not Path(f"/{n}").is_symlink()]
        read_only = ["/usr", *real_dirs]
        network_etc = tuple(n for n in _NETWORK_ETC_ENTRIES if n != "hosts" or not self.hosts)
        for name in _ETC_ENTRIES + (network_etc if self.network else ()):
            if os.path.exists(f"/etc/{name}"):
                args += ["--ro-bind", f"/etc/{name}", f"/etc/{name}"]
                read_only.append(f"/etc/{name}")
        for name in ("passwd", "group") + (() if self.network and not self.hosts else ("hosts",)):
            args += ["--ro-bind", str(self._scratch / name), f"/etc/{name}"]
        # /tmp and home first, so ro_binds that live under the host's /tmp land on top of them.
        args += ["--bind", str(self._scratch / "tmp"), "/tmp", "--bind", str(self._scratch / "home"), HOME_MOUNT]
        for path in self.python_ro:
            args += ["--ro-bind", str(path), str(path)]
        for path in self.ro_binds:
            args += ["--ro-bind", str(path), str(path)]
            read_only.append(str(path))
        args += _mask_args(read_only)
        args += ["--bind", str(self.work_dir), WORK_MOUNT]
        if self.work_alias:  # under the private /tmp, so the host's /tmp is never touched
            args += ["--bind", str(self.work_dir), self.work_alias]
        args += [
            "--chdir", self.work_alias or WORK_MOUNT,
            "--remount-ro", "/",
        ]
        return args

    # -- internals ------------------------------------------------------------------------------

    def _write_identity_files(self) -> None:
        (self._scratch / "tmp").mkdir()
        (self._scratch / "home").mkdir()
        (self._scratch / "tmp").chmod(0o1777)
        uid = SANDBOX_UID
        (self._scratch / "passwd").write_text(
            f"root:x:0:0:root:/root:/bin/bash\n{SANDBOX_USER}:x:{uid}:{uid}:sandbox:{HOME_MOUNT}:/bin/bash\n"
            "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"
        )
        (self._scratch / "group").write_text(f"root:x:0:\n{SANDBOX_USER}:x:{uid}:\nnogroup:x:65534:\n")
        extra = "".join(f"{address}\t{name}\n" for name, address in sorted(self.hosts.items()))
        (self._scratch / "hosts").write_text("127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n" + extra)

    def _disk_paths(self) -> list[Path]:
        return [self.work_dir, self._scratch / "tmp", self._scratch / "home"]

    def _execute(self, argv: list[str], limit: float, stdin: str | None) -> SandboxResult:
        bwrap = shutil.which("bwrap") or "bwrap"
        support = cgroup_support()
        try:
            cgroup = CommandCgroup(support, self.limits)
        except OSError as exc:
            raise SandboxSetupError(f"could not create the command's cgroup: {exc}") from exc
        try:
            return self._execute_in(bwrap, argv, limit, stdin, cgroup)
        finally:
            cgroup.remove()

    def _execute_in(self, bwrap: str, argv: list[str], limit: float, stdin: str | None,
                    cgroup: CommandCgroup) -> SandboxResult:
        started_r, started_w = os.pipe()
        # The marker byte proves bwrap finished its setup and reached our command, so a bwrap
        # error is never mistaken for the command's own failure.
        fd = started_w
        rlimits = self.limits.ulimit_script(cgroup_support())
        launcher = ["/bin/bash", "-c", f'{rlimits} || exit 125; printf 1 >&{fd}; exec {fd}>&-; exec "$@"', "bash",
                    *argv]
        procs = cgroup.procs_files()
        # bwrap (and so everything under it) joins the command's cgroups before it starts
        attach = ["/bin/sh", "-c", 'n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; '
                  'n=$((n-1)); done; exec "$@"', "sh", str(len(procs)), *procs] if procs else []
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [*attach, bwrap, *self.bwrap_args(), "--", *launcher],
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=self.env,
                pass_fds=(started_w,),
                start_new_session=True,
            )
        except OSError as exc:
            os.close(started_r)
            os.close(started_w)
            raise SandboxUnavailable(f"could not start {bwrap}: {exc}; {_INSTALL_HINT}") from exc
        os.close(started_w)
        assert proc.stdout is not None and proc.stderr is not None
        streams = (proc.stdout, proc.stderr)
        readers = [_CappedReader(cast(io.BufferedReader, s), OutputCap(self.max_output_bytes,
                                                                       self.max_output_tail_bytes)) for s in streams]
        for reader in readers:
            reader.start()
        if stdin is not None and proc.stdin is not None:
            threading.Thread(target=_feed_stdin, args=(proc.stdin, stdin.encode()), daemon=True).start()
        timed_out = False
        hit: str | None = None
        disk = DiskWatch(self._disk_paths(), self._disk_baseline, self.limits)
        try:
            timed_out, hit = self._watch(proc, limit, start, cgroup, disk)
            if timed_out or hit:
                _kill_group(proc)
                cgroup.kill_all()
        except BaseException:
            _kill_group(proc)
            cgroup.kill_all()
            raise
        finally:
            for reader in readers:
                reader.join(timeout=5)
            with os.fdopen(started_r, "rb") as marker:
                reached_command = marker.read(1) == b"1"
        duration = time.monotonic() - start
        out, err = (reader.cap.finish() for reader in readers)
        stderr_text = err.text
        if hit is None and not timed_out:  # e.g. the kernel OOM-killed a process, then the command exited
            hit = cgroup.hit() or disk.check()
            if hit is None and cgroup.memory_dir is None and rlimit_memory_hit(proc.returncode, stderr_text):
                hit = "memory"
        if hit:
            stderr_text = stderr_text.rstrip("\n") + ("\n" if stderr_text.strip() else "") + \
                limit_message(hit, self.limits) + "\n"
        if not reached_command and not timed_out and not hit:
            raise SandboxSetupError(
                f"bwrap could not set up the sandbox for work dir {self.work_dir}: {stderr_text.strip()}\n"
                f"bwrap options: {shlex.join(self.bwrap_args())}"
            )
        return SandboxResult(
            stdout_decode_error=out.decode_error, stderr_decode_error=err.decode_error,
            exit_code=None if timed_out or hit else proc.returncode,
            stdout=out.text,
            stderr=stderr_text,
            timed_out=timed_out,
            truncated=bool(out.dropped or err.dropped),
            duration_seconds=round(duration, 3),
            limit=hit,
        )

    def _watch(self, proc: subprocess.Popen[bytes], limit: float, start: float, cgroup: CommandCgroup,
               disk: DiskWatch) -> tuple[bool, str | None]:
        """Wait for the command, checking its cgroup, process count and disk use; (timed out, limit reached)."""
        count_processes = cgroup.pids_dir is None  # no pids cgroup: count the tree ourselves
        disk_interval, next_disk = 0.1, 0.0
        while True:
            remaining = limit - (time.monotonic() - start)
            if remaining <= 0:
                return True, None
            try:
                proc.wait(timeout=min(0.1, remaining))
                return False, None
            except subprocess.TimeoutExpired:
                pass
            hit = cgroup.hit()
            if hit:
                return False, hit
            # bwrap's monitor and the namespace's init are part of the tree, hence the 2
            allowed = self.limits.max_processes + 2
            if count_processes and count_tree(proc.pid, allowed) > allowed:
                return False, "processes"
            if time.monotonic() >= next_disk:
                measured = time.monotonic()
                hit = disk.check()
                if hit:
                    return False, hit
                # a big work dir is measured less often, so watching never costs more than a few percent
                disk_interval = min(2.0, max(0.1, 20 * (time.monotonic() - measured)))
                next_disk = time.monotonic() + disk_interval


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL bwrap's process group; --die-with-parent then tears down the whole pid namespace."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()
