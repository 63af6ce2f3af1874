"""The agent cannot end its own agent process the way only the outside can (issue 31).

A task whose agent process dies by SIGKILL, SIGTERM, SIGINT or SIGHUP ends `agent_process_died`: unscored and
run again, as the OOM killer, an operator or a dying worker would leave it. An agent able to send itself one of
those could re-roll every task it is failing. So before any agent code runs, the process that runs jobs (a task's
forked child, or the batch process) installs, for itself and everything it will start:

- a seccomp filter (libseccomp through `pyseccomp`) answering EPERM to every way of signalling the protected
  processes (this one, the agent host that forked it, the sandbox's init): `kill`/`rt_sigqueueinfo` with their
  pid, `kill` with 0, -1 or the negated id of their process group, `tgkill`/`rt_tgsigqueueinfo` with their
  pid as the thread group; `tkill`, `pidfd_send_signal` (a pidfd or a `/proc/<pid>` fd can name anything),
  `ptrace`, `process_vm_readv/writev` and `pidfd_getfd` outright; `fcntl(F_SETSIG)` with an outside signal (an
  fd's owner can be sent its SIGIO), `timer_create`/`mq_notify` with a signal of their choosing (their sigevent,
  a pointer, cannot be read by the filter, so only the default SIGALRM / no notification pass), and lowering
  RLIMIT_CPU or RLIMIT_RTTIME (the kernel SIGKILLs past the hard limit). A system call of another ABI
  (int 0x80, x32) kills the process with SIGSYS. Any other signal the agent sends itself (SIGSEGV, SIGABRT,
  SIGUSR1, ...) and any exit code it chooses are its own failure (`evidence.process_end`).
  Children signalling their own children, process groups they made, and subprocess timeouts work as before.
- where the kernel has it (Landlock ABI 6, Linux 6.12+), Landlock's signal scope: the job's processes can signal
  only processes of their own task, not a sibling task's (task mode runs several in one agent host).

Why in the job's own process (prctl via libseccomp) rather than bwrap's `--seccomp`: the filter names the pids it
protects, and only the forked job knows its own; a filter given to bwrap would cover the agent host itself and
be fixed before any job existed. Threads started after it (the job's link, the agent's) inherit it.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal

OUTSIDE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
_LANDLOCK_CREATE_RULESET, _LANDLOCK_RESTRICT_SELF = 444, 446  # the same number on every architecture
_LANDLOCK_SCOPE_SIGNAL, _LANDLOCK_CREATE_RULESET_VERSION = 1 << 1, 1 << 0
F_SETSIG = 10
_MASK32 = 0xFFFFFFFF  # pids and signals are 32-bit: the register's upper half is whatever the caller left there


class GuardUnavailable(OSError):
    """The filter could not be installed: the job must not run (its death could not be told apart)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


def landlock_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0),
                           ctypes.c_uint32(_LANDLOCK_CREATE_RULESET_VERSION))
    return max(0, int(version))


def _scope_signals() -> bool:
    """Landlock's signal scope for this process and its descendants; False where the kernel lacks it."""
    if landlock_abi() < 6:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    attr = _RulesetAttr(0, 0, _LANDLOCK_SCOPE_SIGNAL)
    fd = libc.syscall(_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr)),
                      ctypes.c_uint32(0))
    if fd < 0:
        return False
    try:
        return libc.syscall(_LANDLOCK_RESTRICT_SELF, ctypes.c_int(fd), ctypes.c_uint32(0)) == 0
    finally:
        os.close(fd)


def _filter(protected: list[int], groups: list[int]):
    import pyseccomp as sc

    deny = sc.ERRNO(errno.EPERM)
    f = sc.SyscallFilter(sc.ALLOW)
    f.set_attr(sc.Attr.ACT_BADARCH, sc.KILL_PROCESS)
    f.set_attr(sc.Attr.CTL_TSYNC, 1)  # every thread of the process, should there be more than one

    def arg32(index: int, value: int):
        return sc.Arg(index, sc.MASKED_EQ, _MASK32, value & _MASK32)

    for pid in protected:
        for call in ("kill", "rt_sigqueueinfo", "tgkill", "rt_tgsigqueueinfo"):
            f.add_rule(deny, call, arg32(0, pid))
    for target in {0, -1, *(-g for g in groups)}:
        f.add_rule(deny, "kill", arg32(0, target))
    for call in ("tkill", "pidfd_send_signal", "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd"):
        f.add_rule(deny, call)
    for sig in OUTSIDE_SIGNALS:
        f.add_rule(deny, "fcntl", sc.Arg(1, sc.EQ, F_SETSIG), arg32(2, int(sig)))
    f.add_rule(deny, "timer_create", sc.Arg(1, sc.NE, 0))
    f.add_rule(deny, "mq_notify", sc.Arg(1, sc.NE, 0))
    for limit in (resource.RLIMIT_CPU, resource.RLIMIT_RTTIME):
        f.add_rule(deny, "setrlimit", arg32(0, limit))
        f.add_rule(deny, "prlimit64", arg32(1, limit), sc.Arg(2, sc.NE, 0))
    return f


def install() -> str:
    """Guard this process (the one about to run agent code), its parent (the agent host) and pid 1 (the
    sandbox's init); call with one thread. Returns what holds, for the record; raises GuardUnavailable."""
    me, parent = os.getpid(), os.getppid()
    protected = sorted({me, parent, 1})
    groups = sorted({os.getpgid(0), *(_pgid(p) for p in (parent, 1))} - {None, 0})
    try:
        seccomp_filter = _filter(protected, groups)  # type: ignore[arg-type]
        seccomp_filter.load()
    except (ImportError, RuntimeError, OSError) as exc:
        raise GuardUnavailable(errno.ENOSYS, f"cannot guard the agent process against signalling itself "
                               f"(seccomp through libseccomp: install Debian's libseccomp2): {exc}") from None
    return "seccomp, landlock signal scope" if _scope_signals() else "seccomp"


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None
