"""A small logdir with every case the board must handle, made by the real engine and `qit bench run`.

Runs: an XSS payload run, two runs of one task that diverge at step 3 (the first with
screenshots), a 60-step run (pagination), a budget stop, and copies turned into a corrupt
manifest, a schema-invalid manifest, a torn steps line, a live run and an interrupted run.
Results: two files over the same six tasks — an oracle (all solved) and a half oracle.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from qitos.core import AgentModule, Budget, Engine, Task, tool
from qitos.models.scripted import ScriptedModel

REPO = Path(__file__).resolve().parents[2]
XSS_SCRIPT = "<script>alert('xss-script')</script>"
XSS_IMG = "<img src=x onerror=alert('xss-img')>"


def act(text: str) -> str:
    return f'Thought: look\nAction: echo\nAction Input: {json.dumps({"text": text})}'


def final(answer: str) -> str:
    return f"Thought: done\nFinal Answer: {answer}"


@tool(read_only=True)
def echo(text: str) -> str:
    """Echo the text.

    Args:
        text: what to echo
    """
    return text


def tiny_png(rgb: tuple[int, int, int], width: int = 96, height: int = 60) -> bytes:
    """A valid solid-colour PNG, written without an imaging library."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    row = b"\x00" + bytes(rgb) * width
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * height)) + chunk(b"IEND", b""))


class ScreenEnv:
    """An environment that leaves one screenshot per step in the run directory (and one bad path)."""

    def __init__(self) -> None:
        self.n = 0

    def take_visual_assets(self, run_dir: Path) -> list[dict]:
        self.n += 1
        shots = run_dir / "screens"
        shots.mkdir(exist_ok=True)
        (shots / f"step{self.n}.png").write_bytes(tiny_png((40 * self.n % 255, 120, 200)))
        assets = [{"kind": "screenshot", "path": f"screens/step{self.n}.png", "mime_type": "image/png"}]
        if self.n == 1:
            assets.append({"kind": "screenshot", "path": "../../../etc/passwd", "mime_type": "image/png"})
        return assets


def run_engine(logdir: Path, task_id: str, script: list[str], *, objective: str = "Echo things, then answer.",
               max_steps: int = 20, env=None, seed: int = 0, parse_error_limit: int = 3) -> Path:
    task = Task(id=task_id, objective=objective, budget=Budget(max_steps=max_steps))
    engine = Engine(AgentModule(tools=[echo]), ScriptedModel(script), env=env, trace_logdir=logdir, seed=seed,
                    parse_error_limit=parse_error_limit, fsync=False)
    return Path(engine.run(task).run_dir)


def tree_digest(root: Path) -> str:
    """Names, sizes and mtimes of everything under root: proves the board wrote nothing there."""
    h = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        h.update(f"{path.relative_to(root)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _copy(src: Path, name: str) -> Path:
    dst = src.parent / name
    shutil.copytree(src, dst)
    return dst


def _patch_manifest(run_dir: Path, **fields) -> None:
    path = run_dir / "manifest.json"
    data = json.loads(path.read_text())
    data.update(fields)
    path.write_text(json.dumps(data))


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def qit(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=300)


@dataclass
class Corpus:
    root: Path
    logdir: Path
    runs: dict[str, str] = field(default_factory=dict)  # role -> run directory name
    results: list[Path] = field(default_factory=list)


def build_corpus(root: Path) -> Corpus:
    logdir = root / "runs"
    c = Corpus(root, logdir)
    c.runs["xss"] = run_engine(logdir, "xss-task", [
        f"<b>no action here</b> {XSS_SCRIPT}", act(XSS_SCRIPT), final(XSS_IMG)],
        objective=f"Objective with markup {XSS_IMG}").name
    c.runs["pair_a"] = run_engine(logdir, "divergent", [act("alpha"), act("beta"), act("gamma"), final("done")],
                                  env=ScreenEnv()).name
    c.runs["pair_b"] = run_engine(logdir, "divergent", [act("alpha"), act("beta"), act("DELTA"), final("done")],
                                  seed=7, parse_error_limit=4).name
    c.runs["long"] = run_engine(logdir, "long-task", [act(f"item {i}") for i in range(59)] + [final("all done")],
                                max_steps=100).name
    c.runs["budget"] = run_engine(logdir, "budget-task", [act("x"), act("y"), act("z")], max_steps=2).name
    base = logdir / c.runs["pair_b"]
    corrupt = _copy(base, "zz_corrupt_manifest")
    (corrupt / "manifest.json").write_text('{"run_id": "zz_corrupt_manifest", "status": "compl')
    c.runs["corrupt"] = corrupt.name
    invalid = _copy(base, "zz_schema_invalid")
    _patch_manifest(invalid, step_count="many", status="exploded")
    c.runs["invalid"] = invalid.name
    torn = _copy(base, "zz_torn_steps")
    with open(torn / "steps.jsonl", "a") as fh:
        fh.write('{"step_id": 5, "observation": ["half a rec')
    c.runs["torn"] = torn.name
    live = _copy(base, "zz_live_run")
    _patch_manifest(live, status="running", writer={"pid": os.getpid(), "host": socket.gethostname()})
    c.runs["live"] = live.name
    dead = _copy(base, "zz_interrupted_run")
    _patch_manifest(dead, status="running", writer={"pid": dead_pid(), "host": socket.gethostname()})
    c.runs["interrupted"] = dead.name
    (logdir / "not-a-run").mkdir()  # a stray folder: ignored
    c.results = make_results(root, logdir)
    return c


def make_results(root: Path, logdir: Path) -> list[Path]:
    tasks = root / "tasks.jsonl"
    tasks.write_text("".join(json.dumps({"id": f"t{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n"
                             for i in range(6)))
    out = []
    for name, runner in (("oracle.jsonl", "tests.support.runners:oracle"), ("half.jsonl", "tests.qita.runners:half_oracle")):
        done = qit("bench", "run", "-b", "jsonl", "--root", tasks, "--runner", runner, "--validator", "--output", root / name,
                   "--trace-logdir", logdir, "--concurrency", "2", cwd=root)
        assert done.returncode == 0, done.stderr
        out.append(root / name)
    return out
