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


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def tasks_file(tmp_path):
    return write_tasks(tmp_path / "tasks.jsonl", 6)
