"""The `osworld` benchmark adapter: task loading through the platform, readiness, setup, scoring, metrics."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from osworld_fake_controller import FakeController

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.osworld import ControllerUnreachable, load_tasks
from qitos.benchmark.osworld.adapter import OsworldAdapter, agent_view
from qitos.benchmark.osworld.metrics import domain_of
from qitos.benchmark.osworld.vm_pool import LEASES, ControllerLeases
from qitos.benchmark.osworld.engine_env import OsworldEnv
from qitos.benchmark.registry import get_adapter
from qitos.core.stop import StopReason

INFEASIBLE = "osworld-os-a462a795-fdc7-4b23-b689-e8b6df786b78"  # two `execute` setup steps, func infeasible
GSETTINGS = "osworld-os-bedcedc4-4d72-425e-ad62-21960b11fe0d"  # exact_match(vm_command_line gsettings, rule)
CREDENTIALS = "osworld-multi_apps-46407397-a7d5-4c6b-92c6-dbe038b1457b"  # googledrive + login setup
NEEDS_EASYOCR = "osworld-multi_apps-02ce9a50-7af2-47ed-8596-af0c230501f8"  # compare_image_text uses easyocr


@pytest.fixture(scope="module")
def adapter() -> OsworldAdapter:
    return OsworldAdapter()


@pytest.fixture(scope="module")
def load(osworld_data: Path) -> LoadOptions:
    return LoadOptions(data_dir=osworld_data.parent)


@pytest.fixture
def no_provider(monkeypatch):
    monkeypatch.delenv("QITOS_OSWORLD_CONTROLLER", raising=False)


def one(adapter: OsworldAdapter, load: LoadOptions, task_id: str):
    return adapter.load_tasks(load.model_copy(update={"task_ids": [task_id]}))[0]


def test_registered_and_all_369_tasks_load_and_validate(adapter, load, osworld_data) -> None:
    assert isinstance(get_adapter("osworld"), OsworldAdapter)
    tasks = adapter.load_tasks(load)
    assert len(tasks) == 369 and len({t.id for t in tasks}) == 369
    originals = {t.task_id: t for t in load_tasks(osworld_data)}
    for task in tasks:
        assert task.validate_task() == []
        assert task.id.startswith(f"osworld-{task.metadata['domain']}-")
        summary = task.public_summary()["metadata"]
        assert "_evaluator" not in summary and "_setup" not in summary and summary["domain"]
        assert set(task.metadata) == {"benchmark", "split", "domain", "example_id", "snapshot", "related_apps", "source"}
        gold = adapter.gold(task)  # what prepare and evaluate score with: the file's setup and evaluator
        skip = {"path", "trajectory"}
        assert gold.model_dump(exclude=skip) == originals[task.id].model_dump(exclude=skip)
        assert agent_view(gold).evaluator.func == "infeasible" and "evaluator" not in json.dumps(task.model_dump())
    assert adapter.splits(load) == {"test_all": 369, "test_small": 39}
    assert adapter.dataset_digest(load, tasks) == adapter.dataset_digest(load, adapter.load_tasks(load))


def test_split_subset_ids_and_limit(adapter, load) -> None:
    small = adapter.load_tasks(load.model_copy(update={"split": "test_small"}))
    assert len(small) == 39 and {t.metadata["split"] for t in small} == {"test_small"}
    two = adapter.load_tasks(load.model_copy(update={"subset": "os, vlc"}))
    assert len(two) == 24 + 17 and {t.metadata["domain"] for t in two} == {"os", "vlc"}
    assert len(adapter.load_tasks(load.model_copy(update={"subset": "os", "limit": 5}))) == 5
    uuid = INFEASIBLE.split("-", 2)[2]
    for form in (INFEASIBLE, f"os/{uuid}", uuid):
        assert [t.id for t in adapter.load_tasks(load.model_copy(update={"task_ids": [form]}))] == [INFEASIBLE]
    assert domain_of(INFEASIBLE) == "os" and domain_of("osworld-multi_apps-x") == "multi_apps"


@pytest.mark.parametrize("update, message", [
    ({"split": "dev"}, "no split 'dev'"),
    ({"subset": "os,excel"}, "unknown OSWorld domain"),
    ({"task_ids": ["osworld-os-nope"]}, "not in OSWorld split"),
    ({"options": {"observation_type": "video"}}, "observation_type=video"),
    ({"options": {"sleep_after_execution": "soon"}}, "sleep_after_execution"),
    ({"options": {"history": "0"}}, "history=0: expected an integer >= 1"),
    ({"options": {"histroy": "2"}}, "did you mean history"),
])
def test_bad_selection_is_a_usage_error(adapter, load, update, message) -> None:
    with pytest.raises(BenchmarkUsageError, match=message):
        adapter.load_tasks(load.model_copy(update=update))


def test_missing_data_says_how_to_fetch(adapter, tmp_path) -> None:
    empty = LoadOptions(data_dir=tmp_path)
    with pytest.raises(BenchmarkUsageError, match="qit data fetch osworld"):
        adapter.load_tasks(empty)
    assert adapter.splits(empty) == {"test_all": None, "test_small": None}
    assert not adapter.requirements(empty)[0].ok


def test_requirements_name_the_provider(adapter, load, monkeypatch) -> None:
    monkeypatch.delenv("QITOS_OSWORLD_CONTROLLER", raising=False)
    data, scoring, provider = adapter.requirements(load)
    assert data.ok and not provider.ok
    assert scoring.ok and scoring.detail.startswith("357 of 369 test_all tasks can be scored here")
    assert "easyocr (1)" in scoring.detail and "PyDrive (7)" in scoring.detail
    assert "can load and validate, cannot run: no provider" in provider.detail
    assert "QITOS_OSWORLD_CONTROLLER=http://" in provider.detail
    with FakeController() as fake:
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        assert adapter.requirements(load)[2].ok and "Linux" in adapter.requirements(load)[2].detail
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", f"{fake.url}, {fake.url}/")
        assert adapter.requirements(load)[2].detail.count("(Linux)") == 2
    monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)  # server is down now
    down = adapter.requirements(load)[2]
    assert not down.ok and "unreachable" in down.detail


def test_prepare_without_provider_is_requires_unavailable(adapter, load, no_provider, tmp_path) -> None:
    runtime = adapter.prepare(one(adapter, load, GSETTINGS), 0, load, tmp_path)
    assert runtime.env is None and "QITOS_OSWORLD_CONTROLLER" in (runtime.unavailable or "")


def test_prepare_with_provider(adapter, load, monkeypatch, tmp_path) -> None:
    with FakeController() as fake:
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        credentials = adapter.prepare(one(adapter, load, CREDENTIALS), 0, load, tmp_path)
        assert "credentials" in (credentials.unavailable or "")
        ocr = adapter.prepare(one(adapter, load, NEEDS_EASYOCR), 0, load, tmp_path)
        assert ocr.unavailable == ("cannot be scored here: the evaluator needs optional package(s) ['easyocr'] "
                                   "(pip install easyocr)")
        assert fake.requests == []  # nothing ran in the VM for tasks that cannot run
        runtime = adapter.prepare(one(adapter, load, INFEASIBLE), 0, load, tmp_path)
        try:
            assert runtime.unavailable is None and isinstance(runtime.env, OsworldEnv)
            # nothing the agent can reach (env, handles) holds the evaluator; the scoring side reads it by id
            assert not hasattr(runtime.env, "task") and "evaluator" not in str(vars(runtime.env))
            assert set(runtime.handles) == {"provider", "lease", "root", "cache_dir", "downloader"}
            assert adapter.gold(one(adapter, load, INFEASIBLE)).evaluator.func == "infeasible"
            assert [b["command"] for b in fake.calls("/setup/execute")][0] == "echo password | sudo -S su - charles"
            assert len(fake.calls("/setup/execute")) == 2
            assert LEASES.busy() == {fake.url}  # the desktop is this task's until cleanup
        finally:
            adapter.cleanup(runtime)
        assert runtime.handles["provider"].client._http.is_closed and LEASES.busy() == set()


def test_probe_runtime_builds_the_agent_without_touching_the_vm(adapter, load, monkeypatch, tmp_path) -> None:
    from qitos.recipes.osworld import build_react_computer_use

    monkeypatch.delenv("QITOS_OSWORLD_CONTROLLER", raising=False)
    assert adapter.probe_runtime(one(adapter, load, INFEASIBLE), load, tmp_path).unavailable
    with FakeController() as fake:
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        runtime = adapter.probe_runtime(one(adapter, load, INFEASIBLE), load, tmp_path)
        agent = build_react_computer_use(SimpleNamespace(runtime=runtime, options={}))
        adapter.cleanup(runtime)
        assert agent.tools.names() == ["computer"] and fake.requests == [] and LEASES.busy() == set()


def test_unreachable_controller_fails_setup(adapter, load, monkeypatch, tmp_path) -> None:
    with FakeController() as fake:
        url = fake.url
    monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", url)
    with pytest.raises(ControllerUnreachable, match="unreachable"):
        adapter.prepare(one(adapter, load, INFEASIBLE), 0, load, tmp_path)
    assert LEASES.busy() == set()


def test_one_task_per_controller_at_a_time() -> None:
    leases = ControllerLeases()
    assert leases.acquire(["http://a", "http://b"]) == "http://a"
    assert leases.acquire(["http://a", "http://b"]) == "http://b"
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append(leases.acquire(["http://a", "http://b"])))
    waiter.start()
    time.sleep(0.2)
    assert got == []  # both desktops busy: the third task waits
    leases.release("http://b")
    waiter.join(timeout=5)
    assert got == ["http://b"] and leases.busy() == {"http://a", "http://b"}


def _finished(stop: StopReason, final: str | None = None, state: dict | None = None) -> SimpleNamespace:
    """A finished run as the agent side returns it: its answer and its env's final state."""
    return SimpleNamespace(stop_reason=stop, final_answer=final, final_state=state)


@pytest.mark.parametrize("task_id, actions, final, score", [
    (INFEASIBLE, ["FAIL"], None, 1.0),
    (INFEASIBLE, [{"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}, "DONE"], None, 0.0),
    (INFEASIBLE, [{"action_type": "FAIL"}], None, 0.0),  # as upstream: a computer_13 dict FAIL is no FAIL
    (INFEASIBLE, [], "fail", 1.0),  # a final answer FAIL counts as the FAIL action
    (GSETTINGS, ["DONE"], None, 1.0),
    (GSETTINGS, ["FAIL"], None, 0.0),
    (GSETTINGS, [{"action_type": "FAIL"}], None, 1.0),  # ... so the metric runs
    (GSETTINGS, [], "I turned it off", 1.0),  # any other final answer counts as DONE
])
def test_evaluate_scores_through_the_controller(adapter, load, monkeypatch, tmp_path, task_id, actions, final, score) -> None:
    task = one(adapter, load, task_id)
    with FakeController() as fake:
        fake.command_output = lambda command, shell: "uint32 0\n" if "gsettings" in command else ""
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        runtime = adapter.prepare(task, 0, load.model_copy(update={"options": {"sleep_after_execution": "0"}}), tmp_path)
        try:
            runtime.env.reset()
            for action in actions:
                runtime.env.step(action)
            stop = StopReason.FINAL if final else StopReason.ENV_TERMINAL
            evaluation = adapter.evaluate(task, _finished(stop, final, runtime.env.final_state()), runtime)
        finally:
            adapter.cleanup(runtime)
    assert evaluation.score == score and evaluation.success is (score == 1.0)
    assert evaluation.metadata["status"] == "scored" and evaluation.metadata["domain"] == "os"
    assert evaluation.metadata["final_answer_as"] == (None if final is None else ("FAIL" if final == "fail" else "DONE"))
    if task_id == GSETTINGS and score == 1.0:
        assert evaluation.metadata["metrics"] == [{"func": "exact_match", "score": 1.0, "note": None}]


def test_an_episode_that_ended_in_an_error_is_not_scored(adapter, load, monkeypatch, tmp_path) -> None:
    """Upstream's run loop writes no result.txt after an exception: the row has no score (out of upstream's figures)."""
    task = one(adapter, load, INFEASIBLE)
    with FakeController() as fake:
        monkeypatch.setenv("QITOS_OSWORLD_CONTROLLER", fake.url)
        runtime = adapter.prepare(task, 0, load.model_copy(update={"options": {"sleep_after_execution": "0"}}), tmp_path)
        try:
            runtime.env.reset()
            runtime.env.step("FAIL")  # would score 1 on this infeasible task
            evaluation = adapter.evaluate(task, _finished(StopReason.ERROR, None, runtime.env.final_state()), runtime)
        finally:
            adapter.cleanup(runtime)
    assert evaluation.score is None and evaluation.success is None
    assert evaluation.metadata["status"] == "not_scored" and "no result" in evaluation.metadata["reason"]


def test_metrics_over_rows(adapter) -> None:
    rows = [
        {"task_id": "osworld-os-a", "score": 1.0, "success": True, "stop_reason": "env_terminal"},
        {"task_id": "osworld-os-b", "score": 0.5, "success": False, "stop_reason": "budget_steps"},
        {"task_id": "osworld-vlc-c", "score": None, "success": None, "stop_reason": "requires_unavailable"},
        {"task_id": "osworld-vlc-d", "score": 0.0, "success": False, "stop_reason": "env_terminal"},
    ]
    m = adapter.metrics(rows)  # every row counts (upstream's headline); the scored-only figures beside it
    assert (m["rows"], m["scored"], m["requires_unavailable"]) == (4, 3, 1)
    assert m["success_rate"] == pytest.approx(1 / 4) and m["mean_score"] == pytest.approx(1.5 / 4)
    assert m["coverage"] == pytest.approx(3 / 4)
    assert m["scored_success_rate"] == pytest.approx(1 / 3) and m["scored_mean_score"] == pytest.approx(0.5)
    assert m["by_domain"]["os"] == {"rows": 2, "scored": 2, "success_rate": 0.5, "mean_score": 0.75, "coverage": 1.0,
                                    "scored_success_rate": 0.5, "scored_mean_score": 0.75}
    assert m["by_domain"]["vlc"] == {"rows": 2, "scored": 1, "success_rate": 0.0, "mean_score": 0.0, "coverage": 0.5,
                                     "scored_success_rate": 0.0, "scored_mean_score": 0.0}
    assert adapter.metrics([])["success_rate"] is None
