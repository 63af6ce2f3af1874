"""How each job's process ended, as the agent host saw it reaping it: the scoring side's evidence.

The host (`zygote.py`) forks every process that runs agent code and runs none itself; it is their parent, so
only it reads their wait status (an exit code, or the signal that ended them). It sends one line per child on
its control socket, `E{"first", "last", "signal", "code"}` (the job numbers the child ran: one in task mode, a
range for the batch process); the scoring side (`AgentHost.ended`) matches them to its jobs by number, and
`evidence.process_end` says whose failure the end was.
"""

from __future__ import annotations

import json
import os
import signal
import socket


class Reaper:
    """The host's children and the jobs each was given; reports how each ended on the control socket."""

    def __init__(self, control: socket.socket) -> None:
        self.control = control
        self.jobs: dict[int, list[int]] = {}  # child pid -> [first job number, last job number]
        self.wake_r, self.wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # wakes `serve`'s select through the wakeup fd

    def reap(self) -> None:
        try:
            while os.read(self.wake_r, 512):
                pass
        except BlockingIOError:
            pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            first, last = self.jobs.pop(pid, (None, None))
            if first is None:
                continue
            end = {"first": first, "last": last,
                   "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                   "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}
            try:
                self.control.sendall(b"E" + json.dumps(end).encode() + b"\n")
            except OSError:
                return
