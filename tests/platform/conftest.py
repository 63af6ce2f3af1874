import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def write_tasks(path: Path, n: int, crash: tuple[int, ...] = ()) -> Path:
    with open(path, "w") as fh:
        for i in range(n):
            tid = f"crash{i}" if i in crash else f"t{i}"
            fh.write(json.dumps({"id": tid, "question": f"What is {i} + {i}?", "answer": str(2 * i)}) + "\n")
    return path


def qit(*args, cwd: Path, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=full_env, timeout=timeout)


def with_traces(data: list[dict], logdir: Path) -> list[dict]:
    """Hand-written rows with the trace `qit bench eval` checks a success against: a manifest recording each
    row's task, fingerprint and evaluation (what the scoring side writes)."""
    out = []
    for number, row in enumerate(data):
        run_dir = logdir / f"{row['task_id']}_{row.get('trial', 0)}_{number}"
        run_dir.mkdir(parents=True)
        manifest = {"run_id": run_dir.name, "task": {"id": row["task_id"]},
                    "run_spec": {"fingerprint": row.get("run_spec_ref")},
                    "evaluation": {"success": row.get("success"), "score": row.get("score")}}
        (run_dir / "manifest.json").write_text(json.dumps(manifest))
        out.append({**row, "trace_run_dir": str(run_dir)})
    return out


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def tasks_file(tmp_path):
    return write_tasks(tmp_path / "tasks.jsonl", 6)
