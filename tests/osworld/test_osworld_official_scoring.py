"""OSWorld scored by its own evaluators, end to end.

- Every test_all task's metric functions and getters resolve from the data dir's `desktop_env/evaluators`, except
  those needing an optional package that is not installed (counted and named).
- 47 tasks across Calc, Writer, Impress, Chrome and VS Code run through `qit bench run` against test VMs on
  loopback (`osworld_vm_controller.py`), once with a solved and once with an unsolved end state built from real
  files (`osworld_cases.py`); each row's score equals what upstream's getter + metric return when called directly
  (no HTTP, no QitOS) on the same files.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest
from osworld_cases import DOMAINS, HOME, VMState, build_cases
from osworld_chromium import chromium
from osworld_vm_controller import VMController

from qitos.benchmark.osworld.coverage import coverage_report
from qitos.benchmark.osworld.tasks import load_task_file, load_tasks
from qitos.benchmark.osworld.upstream import load_evaluators

REPO = Path(__file__).resolve().parents[2]
VMS = 6


def test_every_test_all_metric_resolves_or_names_its_missing_package(osworld_data: Path) -> None:
    evaluators = load_evaluators(osworld_data)
    report = coverage_report(load_tasks(osworld_data, "test_all"), evaluators)
    print(f"\ntest_all: {report.scorable_tasks} of {report.total_tasks} tasks resolve; "
          f"need a missing optional package: {report.needs_package}; unsupported: {len(report.unsupported)}")
    assert report.total_tasks == 369 and not report.unsupported
    assert report.scorable_tasks + report.needs_package_tasks == report.total_tasks
    optional = {"easyocr", "librosa", "borb", "fastdtw", "pyacoustid", "PyDrive"}
    assert set(report.needs_package) <= {p for p in optional if not _installed(p)}
    assert report.scorable_tasks >= 350  # 357 with the osworld extra installed


def _installed(package: str) -> bool:
    import importlib.util

    module = {"pyacoustid": "acoustid", "PyDrive": "pydrive"}.get(package, package)
    return importlib.util.find_spec(module) is not None


class LocalController:
    """Upstream's controller calls answered from a dict of VM files, for calling upstream's getters directly."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def get_file(self, path: str) -> bytes | None:
        return self.files.get(path)

    def execute_python_command(self, command: str) -> dict[str, Any]:
        code = command.replace("import pyautogui; ", "")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, "HOME": HOME})
        return {"status": "success", "output": done.stdout, "error": done.stderr, "returncode": done.returncode}


class LocalEnv:
    def __init__(self, files: dict[str, bytes], cache_dir: str) -> None:
        self.controller = LocalController(files)
        self.cache_dir = cache_dir
        self.vm_platform = "Linux"


def direct_score(evaluators: Any, task: Any, files: dict[str, bytes], gold: dict[str, bytes]) -> float:
    """Upstream's getter and metric called in process on the same files (single-metric tasks)."""
    raw = task.evaluator.model_dump(mode="json", exclude_unset=True, exclude={"postconfig"})
    with tempfile.TemporaryDirectory() as cache:
        expected_cfg = raw.get("expected")
        if expected_cfg and expected_cfg["type"] == "cloud_file":
            Path(cache, expected_cfg["dest"]).write_bytes(gold[expected_cfg["path"]])
        env = LocalEnv(files, cache)
        if raw["result"]["type"] == "vm_command_line":  # `code --list-extensions | grep ...`: the extension list
            assert raw["result"]["command"][:2] == ["code", "--list-extensions"]
            result = files.get(f"{HOME}/.vscode/extensions.txt", b"").decode()
        else:
            result = evaluators.getter(raw["result"]["type"])(env, raw["result"])
        expected = evaluators.getter(expected_cfg["type"])(env, expected_cfg) if expected_cfg else None
        metric = evaluators.metric(raw["func"])
        options = raw.get("options", {})
        value = metric(result, expected, **options) if expected is not None else metric(result, **options)
        return float(value)


def end_state(task: Any, state: VMState, downloads: dict[str, bytes]) -> dict[str, bytes]:
    """The VM files after the task: setup uploads its inputs, then the episode's placed and saved files."""
    files: dict[str, bytes] = {}
    for step in task.config:
        if step.type == "download":
            for item in step.parameters.files:
                files[item.path] = downloads[item.url]
    files.update(state.placed)
    files.update(state.staged)
    return files


def qit(*args: object, cwd: Path, controllers: list[str], chrome_port: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("QITOS_OSWORLD")}
    env.update(PYTHONPATH=str(REPO), QITOS_OSWORLD_CONTROLLER=",".join(controllers),
               QITOS_OSWORLD_PORTS=f"chromium={chrome_port}")
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_scores_equal_upstream_metrics_on_solved_and_unsolved_files(tmp_path: Path, osworld_data: Path) -> None:
    examples = osworld_data / "evaluation_examples"
    evaluators = load_evaluators(osworld_data)
    cases = build_cases(examples)
    data_dir = tmp_path / "data"
    cache = data_dir / "osworld-cache"
    cache.mkdir(parents=True)
    for url, data in cases.downloads.items():  # the offline mirror of task inputs and gold files
        (cache / hashlib.sha256(url.encode()).hexdigest()).write_bytes(data)
    tasks = {f"osworld-{d}-{i}": load_task_file(examples / "examples" / d / f"{i}.json", d)
             for d, ids in DOMAINS.items() for i in ids}
    assert len(tasks) >= 30 and {t.domain for t in tasks.values()} == set(DOMAINS)
    script = tmp_path / "done.jsonl"
    script.write_text(json.dumps(json.dumps({"thought": "done", "action": {"name": "computer",
                                                                            "arguments": {"action_type": "DONE"}}})) + "\n")
    scores: dict[str, dict[str, float]] = {}
    for kind, state in (("solved", cases.solved), ("unsolved", cases.unsolved)):
        with ExitStack() as stack:
            vms = [stack.enter_context(VMController(tmp_path / kind / f"vm{n}")) for n in range(VMS)]
            chrome_port = stack.enter_context(chromium(tmp_path / kind))  # the VMs' Chrome, for chrome_open_tabs
            for vm in vms:
                for path, data in state.placed.items():
                    vm.place(path, data)
                for path, data in state.staged.items():
                    vm.stage_unsaved(path, data)
            done = qit("bench", "run", "--benchmark", "osworld", "--recipe", "react-computer-use", "--root", osworld_data,
                       "--data-dir", data_dir,
                       "--task-ids", ",".join(tasks), "--model-name", f"scripted:{script}", "--concurrency", VMS,
                       "--option", "sleep_after_execution=0", "--output", f"{kind}.jsonl", cwd=tmp_path,
                       controllers=[vm.url for vm in vms], chrome_port=chrome_port)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        rows = {r["task_id"]: r for r in map(json.loads, (tmp_path / f"{kind}.jsonl").read_text().splitlines())}
        assert set(rows) == set(tasks)
        for task_id, row in rows.items():
            assert row["metadata"]["status"] == "scored", (task_id, row["metadata"].get("reason"), row.get("error"))
        scores[kind] = {task_id: row["score"] for task_id, row in rows.items()}
        for task_id, task in tasks.items():
            direct = direct_score(evaluators, task, end_state(task, state, cases.downloads), cases.downloads)
            assert scores[kind][task_id] == direct, (kind, task_id, scores[kind][task_id], direct)
    # The files are real enough that upstream tells the two apart for every task.
    assert all(score == 1.0 for score in scores["solved"].values()), scores["solved"]
    assert all(score == 0.0 for score in scores["unsolved"].values()), scores["unsolved"]
    print(f"\n{len(tasks)} tasks scored by upstream's evaluators through qit bench run: solved 1.0, unsolved 0.0, "
          "each equal to the direct upstream call")
