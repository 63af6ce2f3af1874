"""A dataset digest covers every field of every task (issue 32 item 7): change any one field of one task in a
copy of the data and the digest, so the RunSpec's configuration, changes; the unchanged copy keeps it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.jsonl.adapter import JsonlBenchmark
from qitos.benchmark.tau_bench.adapter import TauBenchAdapter
from qitos.benchmark.tau_bench.data import clear_cache


def _copy_retail(tau_data: Path, into: Path) -> Path:
    root = into / "tau-bench"
    shutil.copytree(tau_data / "retail", root / "retail", copy_function=shutil.copyfile)
    for folder in (root, *[p for p in root.rglob("*") if p.is_dir()]):
        folder.chmod(0o755)
    return root


def _digest(root: Path) -> str:
    clear_cache()  # a copy changed in place is read again
    adapter = TauBenchAdapter()
    load = LoadOptions(root=root, subset="retail", split="test", limit=2)
    return adapter.dataset_digest(load, adapter.load_tasks(load))


@pytest.mark.parametrize(("field", "value"), [
    ("instruction", "You are a different customer: you want a refund, not an exchange."),
    ("user_id", "someone_else_1234"),
    ("outputs", ["99"]),
    ("actions", []),
])
def test_tau_bench_digest_changes_with_any_field_of_a_task(tau_data, tmp_path, field, value):
    root = _copy_retail(tau_data, tmp_path)
    before = _digest(root)
    assert _digest(root) == before  # the same copy, the same digest
    path = root / "retail" / "tasks_test.json"
    tasks = json.loads(path.read_text())
    assert tasks[1][field] != value
    tasks[1][field] = value
    path.write_text(json.dumps(tasks, indent=2) + "\n")
    assert _digest(root) != before, f"a changed {field} of task 1 kept the digest"


def test_tau_bench_digest_covers_the_rules(tau_data, tmp_path):
    root = _copy_retail(tau_data, tmp_path)
    before = _digest(root)
    rules = json.loads((root / "retail" / "rules.json").read_text())
    (root / "retail" / "rules.json").write_text(json.dumps(rules[:-1], indent=2) + "\n")
    assert _digest(root) != before


def test_jsonl_digest_covers_the_files_a_task_names(tmp_path):
    (tmp_path / "doc.txt").write_text("the answer is 4")
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps({"id": "t0", "question": "2+2?", "answer": "4", "files": ["doc.txt"]}) + "\n")
    adapter = JsonlBenchmark()
    load = LoadOptions(root=tasks)
    before = adapter.dataset_digest(load, adapter.load_tasks(load))
    assert adapter.dataset_digest(load, adapter.load_tasks(load)) == before
    (tmp_path / "doc.txt").write_text("the answer is 5")
    assert adapter.dataset_digest(load, adapter.load_tasks(load)) != before


def test_cybench_digest_covers_metadata_fields_the_record_leaves_out(cybench_data, tmp_path):
    """`tools` and `stateful_shell` are not parsed into the task record; a change to them is still a new digest."""
    from qitos.benchmark.cybench.adapter import CybenchAdapter

    root = tmp_path / "cybench"
    shutil.copytree(cybench_data, root, copy_function=shutil.copyfile, ignore=shutil.ignore_patterns("upstream"))
    adapter = CybenchAdapter()
    load = LoadOptions(root=root, limit=1)
    [task] = adapter.load_tasks(load)
    before = adapter.dataset_digest(load, [task])
    assert adapter.dataset_digest(load, adapter.load_tasks(load)) == before
    meta = adapter.golds.get(task.id).task_dir / "metadata" / "metadata.json"
    data = json.loads(meta.read_text())
    data["stateful_shell"] = not data.get("stateful_shell")
    meta.write_text(json.dumps(data, indent=2))
    assert adapter.dataset_digest(load, adapter.load_tasks(load)) != before
