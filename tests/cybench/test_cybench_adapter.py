"""The CyBench adapter: flags, task ids, the answer wall, requirements, service tasks and row metrics."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.cybench.adapter import CybenchAdapter, CybenchOptions
from qitos.benchmark.cybench.metrics import cybench_metrics
from qitos.benchmark.cybench.tasks import read_task_list
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.registry import get_adapter

DYNASTIC = "cybench_benchmark_hackthebox_cyber-apocalypse-2024_crypto_[Very_Easy]_Dynastic"


def _load(**kw) -> LoadOptions:
    return LoadOptions(**kw)


def test_registry_and_task_ids_follow_the_task_list(cybench_data: Path) -> None:
    adapter = get_adapter("cybench")
    assert isinstance(adapter, CybenchAdapter) and adapter.default_split == "unguided"
    tasks = adapter.load_tasks(_load())
    lines = read_task_list(cybench_data)
    assert [t.id for t in tasks] == ["cybench_" + p.replace("/", "_").replace(" ", "_") for p in lines]
    assert DYNASTIC in {t.id for t in tasks} and all(t.id.startswith("cybench_benchmark_") for t in tasks)
    assert adapter.splits(_load()) == {"unguided": 40, "guided": 40}
    assert adapter.default_budget().max_steps == 15


def test_answers_never_reach_objective_inputs_or_manifest_summary(cybench_data: Path) -> None:
    adapter = CybenchAdapter()
    for split in ("unguided", "guided"):
        for variant in ("hard", "easy"):
            for task in adapter.load_tasks(_load(split=split, variant=variant)):
                answers = adapter.gold(task).gold().subtask_answers  # the scoring side's record
                assert answers and task.validate_task() == []
                shown = json.dumps(task.model_dump(mode="json")) + json.dumps(task.public_summary())
                assert answers[-1] not in shown, task.id
                assert task.metadata["split"] == split and task.metadata["variant"] == variant


def test_split_subset_variant_and_options(cybench_data: Path) -> None:
    adapter = CybenchAdapter()
    guided = {t.id: t for t in adapter.load_tasks(_load(split="guided"))}
    assert "3 questions" in guided[DYNASTIC].objective and "What is the flag?" not in guided[DYNASTIC].objective
    unguided = {t.id: t for t in adapter.load_tasks(_load())}
    assert "What is the flag?" in unguided[DYNASTIC].objective
    easy = {t.id: t for t in adapter.load_tasks(_load(variant="easy"))}
    assert easy[DYNASTIC].objective != unguided[DYNASTIC].objective
    assert len(adapter.load_tasks(_load(subset="crypto"))) == 16
    # It Has Begun, Urgent, PackedAway, LootStash
    assert len(adapter.load_tasks(_load(subset="difficulty:0,file-only"))) == 4
    assert [t.id for t in adapter.load_tasks(_load(task_ids=[DYNASTIC]))] == [DYNASTIC]
    assert len(adapter.load_tasks(_load(subset="service", limit=3))) == 3
    opts = CybenchOptions.from_load(_load(options={"subtask_iterations": "2", "hints": "true",
                                                   "python_path": str(cybench_data)}))
    assert (opts.subtask_iterations, opts.hints, opts.python_path) == (2, True, (cybench_data.resolve(),))


@pytest.mark.parametrize(("load", "flag"), [
    (dict(split="sideways"), "--split sideways"),
    (dict(variant="medium"), "--variant medium"),
    (dict(subset="quantum"), "--subset"),
    (dict(options={"subtask_iteration": "2"}), "--option subtask_iteration"),
    (dict(options={"subtask_iterations": "0"}), "--option subtask_iterations=0"),
    (dict(options={"hints": "maybe"}), "--option hints=maybe"),
    (dict(options={"python_path": "/no/such/dir"}), "--option python_path"),
    (dict(task_ids=["cybench_nope"]), "--task-ids"),
])
def test_bad_flags_name_the_flag(cybench_data: Path, load: dict, flag: str) -> None:
    with pytest.raises(BenchmarkUsageError) as info:
        CybenchAdapter().load_tasks(_load(**load))
    assert flag in str(info.value)


def test_missing_data_names_root_and_fetch(tmp_path: Path) -> None:
    with pytest.raises(BenchmarkUsageError, match=r"--root: .* not a CyBench checkout.*qit data fetch cybench"):
        CybenchAdapter().load_tasks(_load(root=tmp_path))
    with pytest.raises(BenchmarkUsageError, match="--data-dir"):
        CybenchAdapter().load_tasks(_load(data_dir=tmp_path))
    assert CybenchAdapter().splits(_load(root=tmp_path)) == {"unguided": None, "guided": None}
    data_req = CybenchAdapter().requirements(_load(root=tmp_path))[0]
    assert data_req.name == "cybench data" and not data_req.ok


def test_requirements_docker_is_optional(cybench_data: Path) -> None:
    reqs = {r.name: r for r in CybenchAdapter().requirements(_load())}
    assert reqs["cybench data"].ok and "bwrap sandbox" in reqs
    assert reqs["docker (optional)"].ok  # never blocks: service tasks report requires_unavailable instead


def test_service_task_prepares_as_requires_unavailable(cybench_data: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from qitos.benchmark.cybench import runtime as runtime_module

    monkeypatch.setattr(runtime_module, "docker_available", lambda: (False, "no container engine: test"))
    adapter = CybenchAdapter()
    for task in adapter.load_tasks(_load(subset="service")):
        runtime = adapter.prepare(task, 0, _load(), tmp_path)
        assert runtime.unavailable and runtime.env is None
        assert task.id in runtime.unavailable and ("Docker" in runtime.unavailable or "bwrap" in runtime.unavailable)
    assert not (tmp_path / "task").exists()  # nothing was staged


def test_probe_runtime_stages_nothing_but_sets_the_guided_budget(cybench_data: Path, tmp_path: Path) -> None:
    adapter = CybenchAdapter()
    load = _load(split="guided")
    task = next(t for t in adapter.load_tasks(load) if t.id == DYNASTIC)
    task = task.model_copy(update={"budget": adapter.default_budget()})
    runtime = adapter.probe_runtime(task, load, tmp_path)
    try:
        assert runtime.env is not None and runtime.handles["staged_files"] == []
        assert not (tmp_path / "task").exists() and not (tmp_path / "oracle").exists()
        assert task.budget.max_steps == 5 * 7  # same as prepare, so the probe's RunSpec matches the rows'
        assert [t.name for t in runtime.env.tools()] == ["shell", "submit"]
    finally:
        adapter.cleanup(runtime)


def _row(task: str, row_split: str, stop: str = "env_terminal", success: bool | None = None, **meta) -> dict:
    return {"task_id": task, "split": row_split, "stop_reason": stop, "success": success, "metadata": meta}


def test_row_metrics_count_every_selected_task() -> None:
    rows = [
        _row("a", "guided", success=True, split="guided", categories=["crypto"], difficulty=1,
             subtask_score=1.0, guided_final_score=1.0, partial_credit=True),
        _row("b", "guided", success=False, split="guided", categories=["misc", "web"], difficulty=1,
             subtask_score=0.5, guided_final_score=0.0, partial_credit=False),
        _row("c", "guided", stop="setup_failed"),  # ran and failed before scoring: counts as 0
        _row("d", "guided", stop="requires_unavailable"),  # could not run here: counts as 0 too, shown as coverage
    ]
    m = cybench_metrics(rows)
    assert (m["split"], m["attempted"], m["not_attempted"]) == ("guided", 3, 1)
    assert m["not_attempted_reasons"] == {"requires_unavailable": 1} and m["unclassified"] == 2
    assert m["subtask_score"] == pytest.approx(1.5 / 4) and m["guided_final_score"] == pytest.approx(1 / 4)
    assert m["success_rate"] == pytest.approx(1 / 4) and m["partial_rate"] == pytest.approx(1 / 4)
    assert m["coverage"] == pytest.approx(2 / 4) and m["scored_success_rate"] == pytest.approx(1 / 2)
    assert set(m["by_category"]) == {"crypto", "misc", "web"}  # a task counts in each of its categories
    assert m["by_category"]["web"] == {"tasks": 1, "success_rate": 0.0, "partial_rate": 0.0,
                                       "subtask_score": 0.5, "guided_final_score": 0.0}
    assert m["by_difficulty"]["1"]["subtask_score"] == pytest.approx(0.75)


def test_row_metrics_unguided_and_mixed_splits() -> None:
    unguided = [_row("a", "unguided", success=True, split="unguided", categories=["pwn"], difficulty=4),
                _row("b", "unguided", success=False, split="unguided", categories=["pwn"], difficulty=2)]
    m = cybench_metrics(unguided)
    assert m["success_rate"] == 0.5 and "subtask_score" not in m and m["by_difficulty"]["4"]["success_rate"] == 1.0
    nothing_ran = cybench_metrics([_row("x", "unguided", stop="requires_unavailable")])
    assert (nothing_ran["attempted"], nothing_ran["not_attempted"], nothing_ran["success_rate"]) == (0, 1, 0.0)
    assert nothing_ran["coverage"] == 0.0 and nothing_ran["scored_success_rate"] is None
    mixed = cybench_metrics(unguided + [_row("c", "guided", success=True, split="guided", categories=["web"],
                                              difficulty=1, subtask_score=1.0, guided_final_score=1.0)])
    assert set(mixed["by_split"]) == {"guided", "unguided"} and mixed["by_split"]["guided"]["subtask_score"] == 1.0
