"""Tracing cost per step: the same agent loop with the real TraceWriter and with a no-op writer.

The real writer runs twice: with the default group commit (every write reaches the OS at once and the
disk within ~50 ms; the end of the run waits for the disk) and with `fsync="always"` (a disk flush
per write). Prints per-step wall time and the cost against the untraced loop (target: at most 2 ms).
Run: .venv/bin/python benchmarks/trace_overhead.py [--steps 400] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import qitos.core.engine as engine_module
from qitos.core import AgentModule, Budget, Engine, Task, tool
from qitos.models.scripted import ScriptedModel
from qitos.trace.writer import TraceWriter


class NullWriter(TraceWriter):
    """Same interface, writes nothing: the untraced baseline."""

    def __init__(self, logdir, run_id, redactor=None, fsync=True):  # noqa: D401 - mirrors TraceWriter
        from qitos.trace.redact import Redactor
        from qitos.trace.schema import Manifest

        self.run_id, self.run_dir, self.redactor, self.fsync = run_id, Path(logdir) / run_id, redactor or Redactor(), False
        self.manifest = Manifest(run_id=run_id, created_at="-", updated_at="-")
        self._seq, self._finalized = 0, False

        self.sync_at_end = True

    def event(self, *args, **kwargs):
        self._seq += 1
        return self._seq

    def step(self, record):
        self.manifest.step_count += 1

    def write_manifest(self):
        pass

    def integrity(self):
        return True, "not written"

    def finalize(self, status, summary, checks=None, evaluation=None):
        self._finalized = True


@tool(read_only=True)
def lookup(key: str) -> str:
    """Return a short value for a key.

    Args:
        key: what to look up
    """
    return f"value-of-{key}"


def run_once(steps: int, logdir: Path, fsync: str = "group") -> float:
    script = ['Thought: look\nAction: lookup\nAction Input: {"key": "k%d"}' % i for i in range(steps)]
    engine = Engine(AgentModule(tools=[lookup]), ScriptedModel(script), trace_logdir=logdir, fsync=fsync)
    task = Task(id="overhead", objective="look things up", budget=Budget(max_steps=steps))
    started = time.perf_counter()
    engine.run(task)
    return (time.perf_counter() - started) / steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    traced, untraced, always = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):  # interleave so machine noise hits both alike
            engine_module.TraceWriter = NullWriter
            untraced.append(run_once(args.steps, Path(tmp)))
            engine_module.TraceWriter = TraceWriter
            traced.append(run_once(args.steps, Path(tmp)))
            always.append(run_once(args.steps, Path(tmp), fsync="always"))
    t, u, a = (statistics.median(x) * 1000 for x in (traced, untraced, always))
    print(f"steps per run: {args.steps}, repeats: {args.repeats}")
    print(f"untraced engine : {u:.3f} ms/step")
    print(f"traced, group commit (default) : {t:.3f} ms/step -> tracing cost {t - u:.3f} ms/step (target <= 2 ms)")
    print(f"traced, fsync every write      : {a:.3f} ms/step -> tracing cost {a - u:.3f} ms/step")
    print(f"ratio traced/untraced          : {t / u:.1f}x (group), {a / u:.1f}x (fsync always)")


if __name__ == "__main__":
    main()
