"""An agent cannot re-roll a task by killing its own process (issue 31): only the outside makes `agent_process_died`.

A third-party `--runner` on jsonl asks the model (which answers right), then, on each task but the honest ones,
tries one route to end its own agent process the way an OOM kill would: SIGKILL to itself, its process group,
every process (`kill -9 -1`) or its parent (`kill -9 $PPID`) from a shell, its own thread, a raw syscall with
garbage in the pid's upper half, a pidfd of `/proc/self`, the agent host above it; or it dies by a fault of its
own (os.abort(), a segfault through ctypes), or exits with 137 as if killed. A route the guard denies leaves the
agent answering wrong (a `final` row, success false, the denial in the answer); a process that died by its own
hand is an `error` row, success false, with how it ended in the row's metadata. No row is `agent_process_died`,
and the identical command runs nothing again. A runner that kills its own children (a process group it made, a
subprocess timeout, a shell's `kill` of its background job) still succeeds. Task and batch modes.

A signal only the outside may send (SIGTERM to a task's process, SIGHUP to the batch process) stays
`agent_process_died`, unscored and run again (SIGKILL: tests/platform/test_outside_failures.py).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.platform.conftest import REPO, qit, rows, write_tasks
from tests.support.openai_server import OpenAIServer, Reply
from tests.support.reaper import descendants

from .conftest import agent_folder

ROUTES = {1: "kill-self", 2: "killpg-0", 3: "shell-kill-all", 4: "shell-kill-ppid", 5: "pthread-kill",
          6: "raw-syscall", 7: "pidfd-self", 8: "kill-host", 9: "abort", 10: "segfault", 11: "exit-137",
          12: "timer-sigkill", 14: "kill-sibling"}
DENIED = ("kill-sibling", "kill-self", "killpg-0", "shell-kill-all", "shell-kill-ppid", "pthread-kill", "raw-syscall",
          "pidfd-self", "kill-host", "timer-sigkill")
DIED = {"abort": ("SIGSEGV", "SIGABRT"), "segfault": ("SIGSEGV",), "exit-137": ("code 137",)}
HONEST = (0, 13, 15)  # 13 kills its own children on the way to the right answer; 15 is the sibling 14 shoots at
TASKS = 16

KILLER = '''
import ctypes
import os
import re
import signal
import subprocess
import threading
import time

from qitos.core import AgentModule, Decision

ROUTES = %r


def attempt(how):
    """Try to end this process as an outside kill would; return why it did not work."""
    libc = ctypes.CDLL(None, use_errno=True)
    if how == "kill-self":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "killpg-0":
        os.killpg(0, signal.SIGKILL)
    elif how == "shell-kill-all":
        return subprocess.run(["sh", "-c", "kill -9 -1; echo rc=$?"], capture_output=True, text=True).stdout.strip()
    elif how == "shell-kill-ppid":
        return subprocess.run(["sh", "-c", "kill -9 $PPID; echo rc=$?"], capture_output=True, text=True).stdout.strip()
    elif how == "pthread-kill":
        signal.pthread_kill(threading.get_ident(), signal.SIGKILL)
    elif how == "raw-syscall":  # kill(2), the pid with garbage in the register's upper half
        if libc.syscall(62, ctypes.c_long((1 << 32) | os.getpid()), signal.SIGKILL) != 0:
            return f"raw kill: errno {ctypes.get_errno()}"
    elif how == "pidfd-self":
        signal.pidfd_send_signal(os.open(f"/proc/{os.getpid()}", os.O_RDONLY | os.O_DIRECTORY), signal.SIGKILL)
    elif how == "kill-host":
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(2)
    elif how == "abort":
        os.abort()
    elif how == "segfault":
        ctypes.string_at(0)
    elif how == "exit-137":
        os._exit(137)
    elif how == "kill-sibling":  # another task's process in the same agent host (task mode: Landlock's scope)
        return kill_sibling(libc)
    elif how == "timer-sigkill":  # a POSIX timer whose signal is SIGKILL (struct sigevent: value, signo, notify)
        event = (ctypes.c_int * 16)(0, 0, signal.SIGKILL, 0)
        timer = ctypes.c_void_p()
        if libc.timer_create(1, event, ctypes.byref(timer)) != 0:
            return f"timer_create: errno {ctypes.get_errno()}"
    time.sleep(1)
    return "still alive"


def kill_sibling(libc):
    if libc.syscall(444, None, ctypes.c_size_t(0), ctypes.c_uint32(1)) < 6:
        return "no landlock signal scope on this kernel"
    for _ in range(50):
        siblings = []
        for entry in os.listdir("/proc"):
            try:
                fields = open(f"/proc/{entry}/stat").read().rpartition(")")[2].split()
            except (OSError, ValueError):
                continue
            if entry.isdigit() and int(entry) != os.getpid() and int(fields[1]) == os.getppid():
                siblings.append(int(entry))
        if siblings:
            for pid in siblings:
                os.kill(pid, signal.SIGKILL)
            return f"killed {siblings}"
        time.sleep(0.1)
    return "no sibling process"


def kill_own_children():
    """What shell tools and subprocess timeouts do: each must still work under the guard."""
    child = subprocess.Popen(["sleep", "30"], start_new_session=True)
    os.killpg(child.pid, signal.SIGKILL)
    assert child.wait(timeout=10) == -signal.SIGKILL
    try:
        subprocess.run(["sleep", "30"], timeout=0.3)
        raise AssertionError("no timeout")
    except subprocess.TimeoutExpired:
        pass
    out = subprocess.run(["sh", "-c", "sleep 30 & kill -9 $!; wait $!; echo $?"], capture_output=True, text=True)
    assert out.stdout.strip() == "137", out


class Killer(AgentModule):
    name = "self-killer"

    def __init__(self, model):
        super().__init__(tools=[], system_prompt="Answer briefly.")
        self.model = model

    def decide(self, task, state):
        number = int(re.search(r"What is (\\d+) ", task.objective).group(1))
        reply = self.model.complete([{"role": "user", "content": task.objective}])
        answer = (reply.text or "").replace("Final Answer:", "").strip()
        if number == 13:
            kill_own_children()
        if number == 15:
            time.sleep(6)  # alive while task 14 looks for a sibling to kill
        how = ROUTES.get(number)
        if how is None:
            return Decision.final(answer)
        try:
            why = attempt(how)
        except OSError as exc:
            why = f"{type(exc).__name__}: {exc}"
        return Decision.final(f"denied {how}: {why}")


def build(ctx):
    return Killer(ctx.make_model())
''' % (ROUTES,)


def _number(body: dict) -> int:
    return int(re.search(r"What is (\d+) \+", json.dumps(body["messages"])).group(1))


def _run(folder: Path, server: OpenAIServer, mode: str):
    return qit("bench", "run", "-b", "jsonl", "--root", folder.parent / "tasks.jsonl", "--runner", "killer_agent:build",
               "--model-name", "gpt-x", "--base-url", server.base_url, "--agent-processes", mode,
               "--concurrency", "4" if mode == "task" else "1", "--task-timeout", "60",
               "--output", folder.parent / "r.jsonl", "--trace-logdir", folder.parent / "runs", cwd=folder,
               env={"OPENAI_API_KEY": "sk-test"}, timeout=300)


@pytest.mark.parametrize("mode", ["task", "batch"])
def test_an_agent_that_kills_itself_is_scored_not_rerun(tmp_path: Path, mode: str) -> None:
    source = tmp_path / "src" / "killer_agent.py"
    source.parent.mkdir()
    source.write_text(KILLER)
    folder = agent_folder(tmp_path, source)
    write_tasks(tmp_path / "tasks.jsonl", TASKS)
    with OpenAIServer(default=lambda body: Reply(text=f"Final Answer: {2 * _number(body)}")) as server:
        first = _run(folder, server, mode)
        found = {r["task_id"]: r for r in rows(tmp_path / "r.jsonl")}
        assert len(found) == TASKS, (first.returncode, first.stdout[-2000:], first.stderr[-3000:])
        assert all(r["stop_reason"] != "agent_process_died" for r in found.values()), found
        for number in HONEST:
            row = found[f"t{number}"]
            assert row["stop_reason"] == "final" and row["success"] is True, row
        for number, how in ROUTES.items():
            row = found[f"t{number}"]
            assert row["success"] is False, (how, row)
            if how == "kill-sibling":
                assert row["stop_reason"] == "final", row
                assert "Operation not permitted" in row["prediction"] or (
                    mode == "batch" and "no sibling" in row["prediction"]) or "no landlock" in row["prediction"], row
            elif how in DENIED:
                assert row["stop_reason"] == "final", (how, row)
                assert row["prediction"].startswith(f"denied {how}: "), (how, row["prediction"])
                assert re.search(r"Operation not permitted|errno 1\b|rc=1", row["prediction"]), (how, row["prediction"])
            else:
                assert row["stop_reason"] == "error", (how, row)
                end = row["metadata"]["agent_process_end"]
                assert any(sign in end for sign in DIED[how]), (how, end)
                assert "scored as the agent's failure" in row["error"], row["error"]
                manifest = json.loads((Path(row["trace_run_dir"]) / "manifest.json").read_text())
                assert manifest["summary"]["failure_report"]["type"] == "AgentProcessEnded", manifest["summary"]
        assert first.returncode == 0, (first.returncode, first.stdout[-2000:], first.stderr[-3000:])
        assert "outside the agent" not in first.stdout, first.stdout

        asked = len(server.requests)
        second = _run(folder, server, mode)
        assert second.returncode == 0, (second.stdout[-2000:], second.stderr[-3000:])
        assert len(server.requests) == asked, "a rerun ran tasks again"
    assert {r["task_id"]: r for r in rows(tmp_path / "r.jsonl")} == found


@pytest.mark.parametrize(("end", "running", "reason", "says"), [
    ({"signal": 9, "code": None}, False, "agent_process_died", "SIGKILL"),
    ({"signal": 15, "code": None}, False, "agent_process_died", "SIGTERM"),
    ({"signal": 1, "code": None}, False, "agent_process_died", "SIGHUP"),
    ({"signal": 2, "code": None}, False, "agent_process_died", "SIGINT"),
    (None, False, "agent_process_died", "agent host ended"),
    ({"signal": 11, "code": None}, False, "error", "SIGSEGV"),
    ({"signal": 6, "code": None}, False, "error", "SIGABRT"),
    ({"signal": 31, "code": None}, False, "error", "SIGSYS"),
    ({"signal": 10, "code": None}, False, "error", "SIGUSR1"),
    ({"signal": None, "code": 137}, False, "error", "code 137"),
    ({"signal": None, "code": 0}, False, "error", "code 0"),
    (None, True, "error", "went on running"),
])
def test_how_a_process_ended_decides_whose_failure(end, running, reason, says) -> None:
    """Only the signals no agent process may send (the guard) make a death outside the agent."""
    from qitos.run.sides.evidence import process_end

    got, error, metadata = process_end(end, running)
    assert got == reason and says in error, (got, error)
    assert reason != "error" or says in metadata["agent_process_end"]


SLEEPER = '''
import re
import time

from qitos.core import AgentModule, Decision


class Sleeper(AgentModule):
    name = "sleeper"

    def __init__(self, model):
        super().__init__(tools=[], system_prompt="Answer briefly.")
        self.model = model

    def decide(self, task, state):
        reply = self.model.complete([{"role": "user", "content": task.objective}])
        if reply.text == "SLEEP":
            time.sleep(120)  # until the outside ends it
        return Decision.final((reply.text or "").replace("Final Answer:", "").strip())


def build(ctx):
    return Sleeper(ctx.make_model())
'''


@pytest.mark.parametrize(("mode", "signame"), [("task", "SIGTERM"), ("batch", "SIGHUP")])
def test_an_agent_process_ended_from_outside_is_unscored_and_rerun(tmp_path: Path, mode: str, signame: str) -> None:
    """The other side of the line: the signals only the outside can send (here SIGTERM to a task's process, SIGHUP
    to the batch process, as an operator would) leave the task unscored, and the same command runs it again."""
    source = tmp_path / "src" / "sleeper_agent.py"
    source.parent.mkdir()
    source.write_text(SLEEPER)
    folder = agent_folder(tmp_path, source)
    write_tasks(tmp_path / "tasks.jsonl", 2)
    sleep = {"on": True}

    def reply(body: dict) -> Reply:
        number = _number(body)
        return Reply(text="SLEEP" if number == 1 and sleep["on"] else f"Final Answer: {2 * number}")

    def command(server: OpenAIServer) -> list[str]:
        return [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root",
                str(tmp_path / "tasks.jsonl"), "--runner", "sleeper_agent:build", "--model-name", "gpt-x",
                "--base-url", server.base_url,
                "--agent-processes", mode, "--concurrency", "1", "--output", str(tmp_path / "r.jsonl"),
                "--trace-logdir", str(tmp_path / "runs")]

    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "sk-test"}
    with OpenAIServer(default=reply) as server:
        run = subprocess.Popen(command(server), cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        killed: list[int] = []

        def kill_the_sleeper() -> None:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and run.poll() is None:
                if any(_number(r["body"]) == 1 for r in server.requests):
                    found = descendants(run.pid)
                    hosts = {p for p, cmd in found.items() if "sides.zygote" in cmd and not cmd.startswith("bwrap")}
                    agents = [p for p in hosts if _parent(p) in hosts]  # a task's process, or the batch process
                    if agents:
                        os.kill(agents[0], getattr(signal, signame))
                        killed.append(agents[0])
                        return
                time.sleep(0.1)

        thread = threading.Thread(target=kill_the_sleeper)
        thread.start()
        out, err = run.communicate(timeout=240)
        thread.join()
        assert killed, (out[-2000:], err[-2000:])
        first = {r["task_id"]: r for r in rows(tmp_path / "r.jsonl")}
        row = first["t1"]
        assert row["stop_reason"] == "agent_process_died" and row["success"] is None, row
        assert f"killed by {signame}" in row["error"], row["error"]
        assert run.returncode == 3, (run.returncode, out[-2000:])
        assert first["t0"]["success"] is True, first["t0"]

        sleep["on"] = False
        again = subprocess.run(command(server), cwd=folder, env=env, capture_output=True, text=True, timeout=240)
        assert again.returncode == 0, (again.stdout[-2000:], again.stderr[-2000:])
        assert "1 row(s) failed outside the agent (agent_process_died); running them again" in again.stderr
    final = {r["task_id"]: r for r in rows(tmp_path / "r.jsonl")}
    assert final["t1"]["stop_reason"] == "final" and final["t1"]["success"] is True, final["t1"]


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return int(handle.read().rpartition(")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def test_a_process_on_its_way_out_is_not_running(tmp_path) -> None:
    """`TaskWatch.running`: a live process runs; a zombie does not; nor does one that has released its memory on
    its way out (its sockets close after that, so a job killed with its host is not taken as one that closed its
    connection and went on running)."""
    import subprocess
    import time

    from qitos.run.sides.limits import AgentLimits
    from qitos.run.sides.watch import TaskWatch, _live

    child = subprocess.Popen(["sleep", "30"])
    try:
        watch = TaskWatch(child.pid, AgentLimits(), per_task=False, private_world=False)
        assert watch.running()
        child.kill()
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "the killed child did not become a zombie"
            time.sleep(0.01)
        assert not watch.running()  # a zombie, not reaped yet
    finally:
        child.kill()
        child.wait()
    assert not watch.running()  # gone
    live = Path("/proc/self/status").read_bytes()
    assert _live(live)
    exiting = b"\n".join(line for line in live.split(b"\n") if not line.startswith((b"Vm", b"Rss")))
    assert not _live(exiting)


@pytest.mark.parametrize(("end", "reason"), [({"signal": 9, "code": None}, "agent_process_died"),
                                             ({"signal": None, "code": 0}, "error")])
def test_a_job_whose_socket_broke_before_its_job_was_sent_ends_by_how_its_process_ended(end, reason) -> None:
    """The job's process said hello and was gone before the scoring side sent it the job: that send meets a
    closed socket (broken pipe). The row is judged by how the process ended, as when its socket closes later: a
    kill from outside is unscored, an exit of its own is the agent's failure; never a crash of the run."""
    import socket
    import threading
    from types import SimpleNamespace

    from qitos.core.task import Task
    from qitos.run.sides.limits import AgentLimits
    from qitos.run.sides.scoring import _Job
    from qitos.run.sides.wire import Channel

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
    theirs.send(b"P")  # the hello (the pid comes with it, as the socket's credentials)
    theirs.close()  # ... and the process is gone

    class Host:
        mode = "batch"
        asked: list = []

        def open_job(self) -> Channel:
            channel = Channel(ours)
            channel.job = (1, 0)
            return channel

        def ended(self, job, timeout):
            self.asked.append(job)
            return end

    host = Host()
    ctx = SimpleNamespace(agent_host=lambda: host, cfg=SimpleNamespace(limits=AgentLimits()),
                          cancel_event=threading.Event(), model_is_proxied=lambda: False)
    job = SimpleNamespace(model_dump=lambda mode: {"task": "x" * 100_000}, limits=None)
    outcome = _Job(ctx, Task(id="t", objective="o"), None, None).converse(job)
    assert outcome.stop_reason == reason and host.asked == [(1, 0)], outcome
    assert ("killed by SIGKILL" if reason == "agent_process_died" else "exited with code 0") in outcome.error
