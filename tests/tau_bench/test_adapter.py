"""The tau-bench adapter: selection, ids, hidden gold, data errors, digests, tool schemas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.registry import get_adapter
from qitos.benchmark.tau_bench.adapter import TauBenchAdapter


def load(tau_data: Path, **kwargs) -> LoadOptions:
    return LoadOptions(data_dir=tau_data.parent, **kwargs)


def test_registered_name_and_defaults() -> None:
    adapter = get_adapter("tau-bench")
    assert isinstance(adapter, TauBenchAdapter)
    assert adapter.default_split == "test" and adapter.default_recipe == "tool-calling"
    assert adapter.deterministic_env is True
    assert set(adapter.recipes()) == {"tool-calling", "react", "act", "few-shot", "tool-calling-repair", "oracle"}
    oracle = adapter.recipes()["oracle"]
    assert oracle.official is False and oracle.needs_model is False


def test_splits_report_counts_per_domain(tau_data: Path) -> None:
    adapter = TauBenchAdapter()
    assert adapter.splits(load(tau_data)) == {"test": 115, "train": 500, "dev": 20}
    assert adapter.splits(load(tau_data, subset="airline")) == {"test": 50}
    assert adapter.splits(LoadOptions(root=tau_data, subset="retail"))["train"] == 500


@pytest.mark.parametrize(
    ("subset", "split", "expected"),
    [("retail", "valid", "retail has the splits test, train, dev"),
     ("airline", "train", "airline has the splits test"),
     ("hotel", "test", "--subset hotel: tau-bench has the subsets retail, airline")],
)  # fmt: skip
def test_unknown_split_or_subset_names_the_choices(tau_data: Path, subset: str, split: str, expected: str) -> None:
    with pytest.raises(BenchmarkUsageError, match=expected):
        TauBenchAdapter().load_tasks(load(tau_data, subset=subset, split=split))


def test_missing_data_says_how_to_fetch(tmp_path: Path) -> None:
    adapter = TauBenchAdapter()
    options = LoadOptions(data_dir=tmp_path, split="test")
    [requirement] = adapter.requirements(options)
    assert not requirement.ok and "qit data fetch tau-bench" in requirement.detail
    assert adapter.splits(options) == {"test": None, "train": None, "dev": None}
    with pytest.raises(BenchmarkUsageError, match="qit data fetch tau-bench"):
        adapter.load_tasks(options)


def test_requirements_ok_with_data(tau_data: Path) -> None:
    [requirement] = TauBenchAdapter().requirements(load(tau_data))
    assert requirement.ok


@pytest.mark.parametrize(("subset", "split", "count"), [("retail", "test", 115), ("retail", "train", 500),
                                                         ("retail", "dev", 20), ("airline", "test", 50)])
def test_task_ids_and_counts(tau_data: Path, subset: str, split: str, count: int) -> None:
    tasks = TauBenchAdapter().load_tasks(load(tau_data, subset=subset, split=split))
    assert len(tasks) == count
    assert tasks[0].id == f"tau_{subset}_{split}_00000" and tasks[-1].id == f"tau_{subset}_{split}_{count - 1:05d}"
    assert all(not t.validate_task() for t in tasks)


def test_gold_and_instruction_never_reach_the_agent_or_manifest(tau_data: Path) -> None:
    raw = json.loads((tau_data / "retail" / "tasks_test.json").read_text())
    adapter = TauBenchAdapter()
    tasks = adapter.load_tasks(load(tau_data, subset="retail", split="test"))
    for task, source in zip(tasks, raw, strict=True):
        gold = adapter.gold(task)  # on the scoring side only
        assert gold["actions"] == source["actions"] and gold["outputs"] == source["outputs"]
        visible = json.dumps([task.model_dump(mode="json"), task.public_summary()])
        assert source["instruction"] not in visible and source["user_id"] not in visible
        for action in source["actions"]:
            for value in action["kwargs"].values():
                if isinstance(value, str) and len(value) > 3:
                    assert value not in visible
        summary = task.public_summary()["metadata"]
        assert not {"actions", "outputs", "_instruction", "_user_id"} & set(summary)


def test_limit_task_ids_and_default_split(tau_data: Path) -> None:
    adapter = TauBenchAdapter()
    first_two = adapter.load_tasks(load(tau_data, limit=2))
    assert [t.id for t in first_two] == ["tau_retail_test_00000", "tau_retail_test_00001"]
    picked = adapter.load_tasks(load(tau_data, subset="airline", task_ids=["tau_airline_test_00049"]))
    assert [t.id for t in picked] == ["tau_airline_test_00049"]


def test_dataset_digest_covers_selection_and_database(tau_data: Path) -> None:
    adapter = TauBenchAdapter()
    first = load(tau_data, split="test", limit=3)
    digest = adapter.dataset_digest(first, adapter.load_tasks(first))
    assert digest == adapter.dataset_digest(first, adapter.load_tasks(first))
    other = load(tau_data, split="test", limit=4)
    assert digest != adapter.dataset_digest(other, adapter.load_tasks(other))
    airline = load(tau_data, subset="airline", limit=3)
    assert digest != adapter.dataset_digest(airline, adapter.load_tasks(airline))


def test_bad_user_options_are_usage_errors(tau_data: Path) -> None:
    adapter = TauBenchAdapter()
    with pytest.raises(BenchmarkUsageError, match="user_strategy=bogus.*llm, react, verify, reflection, scripted"):
        adapter.load_tasks(load(tau_data, options={"user_strategy": "bogus"}))
    with pytest.raises(BenchmarkUsageError, match="user_replies"):
        adapter.load_tasks(load(tau_data, options={"user_strategy": "scripted", "user_replies": "[1, 2"}))


@pytest.mark.parametrize("subset", ["retail", "airline"])
def test_env_tools_are_tools_json_exactly(tau_data: Path, tmp_path: Path, subset: str) -> None:
    adapter = TauBenchAdapter()
    options = load(tau_data, subset=subset, limit=1)
    runtime = adapter.prepare(adapter.load_tasks(options)[0], 0, options, tmp_path)
    schemas = json.loads((tau_data / subset / "tools.json").read_text())
    shown = runtime.env.registry(with_respond=False)
    assert shown.openai_schemas() == schemas
    with_respond = runtime.env.registry(with_respond=True)
    assert with_respond.names() == [s["function"]["name"] for s in schemas] + ["respond"]
    assert shown.get("respond") is not None  # not shown, but a text reply still reaches the user
    assert {t.name for t in shown if t.read_only} >= {"calculate", "think", "get_user_details"}
    assert not shown.get("transfer_to_human_agents").read_only


def test_declared_user_strategies_are_the_simulators() -> None:
    from typing import get_args

    from qitos.benchmark.tau_bench.options import UserStrategy
    from qitos.benchmark.tau_bench.user import USER_STRATEGIES

    assert get_args(UserStrategy) == USER_STRATEGIES


def test_upstream_run_options_select_and_refuse(tau_data: Path) -> None:
    adapter = TauBenchAdapter()
    load = LoadOptions(data_dir=tau_data.parent, subset="airline", split="test",
                       options={"start_index": "45", "end_index": "100"})
    assert [t.id for t in adapter.load_tasks(load)] == [f"tau_airline_test_{i:05d}" for i in range(45, 50)]
    for options, words in (({"start_index": "x"}, "start_index=x: expected an integer"),
                           ({"start_index": "5", "end_index": "2"}, "start_index <= end_index"),
                           ({"shuffle": "maybe"}, "shuffle=maybe"),
                           ({"user_temperature": "hot"}, "--user-temperature hot: expected a number"),
                           ({"user_stratgy": "react"}, "did you mean user_strategy")):
        with pytest.raises(BenchmarkUsageError, match=words):
            adapter.load_tasks(load.model_copy(update={"options": options}))
