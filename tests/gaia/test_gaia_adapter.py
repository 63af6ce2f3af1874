"""The GAIA adapter and recipes in process: task mapping, requirements, runtime, evaluation, metrics."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions, RecipeContext, TaskRuntime
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.gaia import runtime as gaia_runtime
from qitos.benchmark.gaia.adapter import GaiaAdapter, parse_levels
from qitos.benchmark.gaia.tools import GAIA_TOOL_NAMES
from qitos.core.engine import RunResult
from qitos.core.stop import StopReason
from qitos.core.task import Task
from qitos.models.base import ModelResponse
from qitos.recipes.gaia import GaiaAgent, build_react_agent, build_tool_calling_agent

from .make_fixture import QUESTIONS, TEST_QUESTIONS, build_gaia_fixture
from tests.conftest import require_system



@pytest.fixture(scope="module")
def gaia_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gaia_fixture(tmp_path_factory.mktemp("gaia"))


@pytest.fixture
def adapter() -> GaiaAdapter:
    return GaiaAdapter()


def _result(final: str | None) -> RunResult:
    return RunResult(run_id="r", run_dir="/nonexistent", status="completed", stop_reason=StopReason.FINAL,
                     final_answer=final)


# -- tasks ------------------------------------------------------------------------------------------


def test_tasks_mirror_the_upstream_rows(adapter: GaiaAdapter, gaia_root: Path) -> None:
    tasks = adapter.load_tasks(LoadOptions(root=gaia_root, split="validation"))
    assert [t.id for t in tasks] == [q[0] for q in QUESTIONS]
    by_id = {t.id: t for t in tasks}
    for task_id, level, question, file_name, answer, _ in QUESTIONS:
        task = by_id[task_id]
        assert task.objective == question and task.metadata["level"] == level
        assert adapter.gold(task) == answer and task.metadata["labeled"] is True and "answer" not in task.metadata
        if file_name:
            assert [Path(r.path).name for r in task.resources] == [file_name]
            assert Path(task.resources[0].path).is_absolute() and Path(task.resources[0].path).is_file()
            assert task.inputs == {"file_name": file_name}
        else:
            assert task.resources == [] and task.inputs == {}
        summary = json.dumps(task.public_summary())
        assert "answer" not in task.public_summary()["metadata"] and f'"{answer}"' not in summary
        assert task.validate_task() == []


def test_parquet_copies_load_too(adapter: GaiaAdapter, tmp_path: Path) -> None:
    root = build_gaia_fixture(tmp_path / "parquet", fmt="parquet")
    assert not (root / "2023" / "validation" / "metadata.jsonl").exists()
    tasks = adapter.load_tasks(LoadOptions(root=root, subset="3"))
    assert [t.id for t in tasks] == [q[0] for q in QUESTIONS if q[1] == 3]


def test_test_split_is_unlabeled(adapter: GaiaAdapter, gaia_root: Path) -> None:
    tasks = adapter.load_tasks(LoadOptions(root=gaia_root, split="test"))
    assert [t.id for t in tasks] == [q[0] for q in TEST_QUESTIONS]
    assert all(t.id not in adapter.golds and t.metadata["labeled"] is False for t in tasks)


@pytest.mark.parametrize(("subset", "levels"), [
    ("1", {1}), ("level2", {2}), ("2023_level3", {3}), ("Level 1", {1}), ("1,3", {1, 3}), ("all", None), (None, None),
])
def test_subset_selects_levels(adapter: GaiaAdapter, gaia_root: Path, subset: str | None, levels: set[int] | None) -> None:
    assert parse_levels(subset) == levels
    tasks = adapter.load_tasks(LoadOptions(root=gaia_root, split="validation", subset=subset))
    expected = [q[0] for q in QUESTIONS if levels is None or q[1] in levels]
    assert [t.id for t in tasks] == expected


def test_bad_subset_and_split_are_usage_errors(adapter: GaiaAdapter, gaia_root: Path) -> None:
    with pytest.raises(BenchmarkUsageError, match="--subset '4'.*1, 2, 3"):
        adapter.load_tasks(LoadOptions(root=gaia_root, subset="4"))
    with pytest.raises(BenchmarkUsageError, match="--split 'train'.*validation, test"):
        adapter.load_tasks(LoadOptions(root=gaia_root, split="train"))


def test_task_ids_and_limit(adapter: GaiaAdapter, gaia_root: Path) -> None:
    wanted = [QUESTIONS[4][0], QUESTIONS[1][0]]
    tasks = adapter.load_tasks(LoadOptions(root=gaia_root, task_ids=wanted))
    assert {t.id for t in tasks} == set(wanted)
    assert len(adapter.load_tasks(LoadOptions(root=gaia_root, limit=3))) == 3
    with pytest.raises(BenchmarkUsageError, match="unknown task id"):
        adapter.load_tasks(LoadOptions(root=gaia_root, task_ids=["nope"]))


# -- data location and requirements -----------------------------------------------------------------


def test_data_dir_default_and_split_counts(adapter: GaiaAdapter, gaia_root: Path, tmp_path: Path) -> None:
    shutil.copytree(gaia_root, tmp_path / "gaia")
    load = LoadOptions(data_dir=tmp_path)
    assert adapter.splits(load) == {"validation": len(QUESTIONS), "test": len(TEST_QUESTIONS)}
    assert len(adapter.load_tasks(load)) == len(QUESTIONS)
    data = adapter.requirements(load)[0]
    assert data.ok and str(tmp_path / "gaia") in data.detail


def test_missing_copy_says_where_and_how(adapter: GaiaAdapter, tmp_path: Path) -> None:
    load = LoadOptions(data_dir=tmp_path)
    assert adapter.splits(load) == {"validation": None, "test": None}
    data = adapter.requirements(load)[0]
    assert not data.ok
    for needle in (str(tmp_path / "gaia"), "--root", "2023/<split>/metadata.jsonl", "HF_TOKEN",
                   "python -m qitos.benchmark.gaia.fetch"):
        assert needle in data.detail
    with pytest.raises(BenchmarkUsageError, match=r"no GAIA copy found at .*2023/validation/metadata.jsonl.*--root"):
        adapter.load_tasks(load)


def test_fetch_helper_needs_a_token_and_stays_out_of_the_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    from qitos.benchmark.gaia.fetch import main

    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    assert main(["--target", str(tmp_path / "gaia")]) == 2
    assert "needs a Hugging Face token" in capsys.readouterr().err and not (tmp_path / "gaia").exists()
    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    inside = Path(__file__).resolve().parents[2] / "gaia-copy"
    assert main(["--target", str(inside)]) == 2
    assert "inside the QitOS source tree" in capsys.readouterr().err and not inside.exists()


def test_missing_attachment_names_the_row(adapter: GaiaAdapter, gaia_root: Path, tmp_path: Path) -> None:
    root = shutil.copytree(gaia_root, tmp_path / "copy")
    (root / "2023" / "validation" / "invoice.pdf").unlink()
    with pytest.raises(BenchmarkUsageError, match=r"metadata.jsonl:10: attachment 'invoice.pdf' is missing"):
        adapter.load_tasks(LoadOptions(root=root))


def test_dataset_digest_is_the_copy_not_the_selection(adapter: GaiaAdapter, gaia_root: Path, tmp_path: Path) -> None:
    def digest(load: LoadOptions) -> str:
        return adapter.dataset_digest(load, adapter.load_tasks(load))

    full = digest(LoadOptions(root=gaia_root))
    assert digest(LoadOptions(root=gaia_root, limit=2)) == full
    assert digest(LoadOptions(root=gaia_root, task_ids=[QUESTIONS[3][0]], subset="1")) == full
    moved = shutil.copytree(gaia_root, tmp_path / "elsewhere")
    assert digest(LoadOptions(root=moved)) == full
    (moved / "2023" / "validation" / "moons.md").write_text("changed", encoding="utf-8")
    assert digest(LoadOptions(root=moved)) != full
    assert digest(LoadOptions(root=gaia_root, split="test")) != full


def test_web_requirement_and_bad_provider(adapter: GaiaAdapter, gaia_root: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QITOS_WEB_SEARCH", raising=False)
    web = adapter.requirements(LoadOptions(root=gaia_root))[2]
    assert web.ok and web.detail.startswith("off") and "QITOS_WEB_SEARCH" in web.detail
    monkeypatch.setenv("QITOS_WEB_SEARCH", "tavily")
    monkeypatch.setenv("QITOS_WEB_SEARCH_KEY", "k-123")
    assert adapter.requirements(LoadOptions(root=gaia_root))[2].detail == "on (tavily)"
    monkeypatch.setenv("QITOS_WEB_SEARCH", "altavista")
    assert not adapter.requirements(LoadOptions(root=gaia_root))[2].ok
    with pytest.raises(BenchmarkUsageError, match="QITOS_WEB_SEARCH='altavista'"):
        adapter.load_tasks(LoadOptions(root=gaia_root))


# -- runtime ----------------------------------------------------------------------------------------


def _prepare(adapter: GaiaAdapter, gaia_root: Path, workdir: Path, index: int = 0) -> tuple[Task, TaskRuntime]:
    load = LoadOptions(root=gaia_root)
    task = adapter.load_tasks(load)[index]
    return task, adapter.prepare(task, 0, load, workdir)


def test_prepare_copies_the_attachment_and_binds_the_tools(adapter: GaiaAdapter, gaia_root: Path, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QITOS_WEB_SEARCH", raising=False)
    _, runtime = _prepare(adapter, gaia_root, tmp_path / "work")
    try:
        assert (tmp_path / "work" / "shopping_list.txt").is_file() and runtime.handles["attachments"] == ["shopping_list.txt"]
        tools = {t.name: t for t in runtime.handles["tools"]}
        assert tuple(tools) == GAIA_TOOL_NAMES
        assert "apples: 4" in tools["read_file"].invoke({"path": "shopping_list.txt"})
        assert "web access is off" in tools["visit_page"].invoke({"url": "http://example.com"})
        python = "bwrap" if gaia_runtime.python_status()[0] else "off"
        assert runtime.handles["toolset_name"] == f"gaia_tools_v1(python={python},web=off)"
    finally:
        adapter.cleanup(runtime)
    assert "_sandbox" not in runtime.handles


def test_python_tool_says_when_the_sandbox_is_unavailable(adapter: GaiaAdapter, gaia_root: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gaia_runtime, "python_status", lambda: (False, "bwrap is not on PATH"))
    requirement = gaia_runtime.python_requirement()
    assert requirement.ok and "unavailable" in requirement.detail and "run_python" in requirement.detail
    _, runtime = _prepare(adapter, gaia_root, tmp_path / "work")
    tools = {t.name: t for t in runtime.handles["tools"]}
    assert tools["run_python"].invoke({"code": "print(1)"}).startswith(
        "run_python is unavailable on this machine: bwrap is not on PATH")
    assert "python=off" in runtime.handles["toolset_name"]
    adapter.cleanup(runtime)


def test_prepared_python_is_confined(adapter: GaiaAdapter, gaia_root: Path, tmp_path: Path) -> None:
    ok, reason = gaia_runtime.python_status()
    require_system(ok, f"the bubblewrap sandbox: {reason}")
    _, runtime = _prepare(adapter, gaia_root, tmp_path / "work")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    try:
        run = {t.name: t for t in runtime.handles["tools"]}["run_python"]
        outside = tmp_path / "escaped.txt"
        assert "exit code: 1" in run.invoke({"code": f"open({str(outside)!r}, 'w').write('x')"})
        assert not outside.exists()
        port = listener.getsockname()[1]
        code = ("import socket\ntry:\n    socket.create_connection(('127.0.0.1', %d), timeout=3)\n    print('REACHED')\n"
                "except OSError as exc:\n    print('BLOCKED', type(exc).__name__)\n" % port)
        out = run.invoke({"code": code})
        assert "BLOCKED" in out and "REACHED" not in out
        assert "exit code: 0" in run.invoke({"code": "open('note.txt', 'w').write('inside')"})
        assert (tmp_path / "work" / "note.txt").read_text() == "inside"
    finally:
        listener.close()
        adapter.cleanup(runtime)


# -- evaluation and metrics -------------------------------------------------------------------------


@pytest.mark.parametrize(("final", "prediction", "success", "source"), [
    ("7", "7", True, "whole_final_answer"),
    ("  7 \n", "7", True, "whole_final_answer"),
    ("FINAL ANSWER: 7", "7", True, "final_answer_marker"),
    ("I counted 4 + 3.\nFINAL ANSWER: **7**", "7", True, "final_answer_marker"),
    ("7 apples", "7 apples", False, "whole_final_answer"),
    (None, None, False, "no_answer"),
])
def test_evaluate_extracts_and_scores(adapter: GaiaAdapter, gaia_root: Path, final: str | None,
                                      prediction: str | None, success: bool, source: str) -> None:
    task = adapter.load_tasks(LoadOptions(root=gaia_root))[0]  # answer "7", level 1
    evaluation = adapter.evaluate(task, _result(final), TaskRuntime())
    assert (evaluation.prediction, evaluation.success, evaluation.score) == (prediction, success, float(success))
    assert evaluation.metadata["level"] == 1 and evaluation.metadata["labeled"] is True
    assert evaluation.metadata["answer_source"] == source


def test_evaluate_uses_the_official_rules(adapter: GaiaAdapter, gaia_root: Path) -> None:
    tasks = {t.id: t for t in adapter.load_tasks(LoadOptions(root=gaia_root))}
    invoice, census = tasks[QUESTIONS[9][0]], tasks[QUESTIONS[14][0]]
    assert adapter.evaluate(invoice, _result("FINAL ANSWER: $1,234.50"), TaskRuntime()).success is True
    assert adapter.evaluate(census, _result("amberfield,dunmore,kestrel bay"), TaskRuntime()).success is True
    assert adapter.evaluate(census, _result("Dunmore, Amberfield, Kestrel Bay"), TaskRuntime()).success is False


def test_unlabeled_rows_are_not_scored(adapter: GaiaAdapter, gaia_root: Path) -> None:
    task = adapter.load_tasks(LoadOptions(root=gaia_root, split="test"))[1]
    evaluation = adapter.evaluate(task, _result("FINAL ANSWER: 391"), TaskRuntime())
    assert evaluation.success is None and evaluation.score is None and evaluation.prediction == "391"
    assert evaluation.metadata == {"level": 2, "answer_source": "final_answer_marker", "labeled": False,
                                   "raw_final_answer": "FINAL ANSWER: 391"}


def test_metrics_by_level_are_json_friendly(adapter: GaiaAdapter) -> None:
    rows = [{"task_id": f"v{i}", "success": i % 2 == 0, "metadata": {"level": 1 + i % 3, "labeled": True}}
            for i in range(6)]
    rows += [{"task_id": "t1", "success": None, "metadata": {"level": 2, "labeled": False}},
             {"task_id": "v9", "success": False, "error": "boom", "metadata": {"level": 3, "labeled": True}}]
    metrics = json.loads(json.dumps(adapter.metrics(rows)))
    assert metrics["accuracy"]["correct"] == 3 and metrics["accuracy"]["total"] == 7
    assert metrics["level_1"] == {"accuracy": 0.5, "correct": 1, "total": 2, "ci95": metrics["level_1"]["ci95"]}
    assert metrics["level_2"]["total"] == 2 and metrics["level_2"]["correct"] == 1
    assert metrics["level_3"]["total"] == 3 and metrics["level_3"]["correct"] == 1
    low, high = metrics["accuracy"]["ci95"]
    assert 0 < low < 3 / 7 < high < 1
    assert metrics["unlabeled"] == 1 and metrics["errors"] == 1
    empty = adapter.metrics([])
    assert empty["accuracy"] == {"accuracy": None, "correct": 0, "total": 0, "ci95": None}


# -- recipes ----------------------------------------------------------------------------------------


def test_react_recipe_prompt_and_final_answer_convention(adapter: GaiaAdapter, gaia_root: Path, tmp_path: Path) -> None:
    load = LoadOptions(root=gaia_root)
    task, runtime = _prepare(adapter, gaia_root, tmp_path / "work")
    try:
        agent = adapter.recipes()["react"].build(RecipeContext(task, runtime, load, {}, lambda name: None))
        assert agent.parser.name == "react_text_v1" and agent.toolset_name == runtime.handles["toolset_name"]
        system = agent.system_prompt(task)
        assert system.rstrip().endswith("Thought: <your reasoning>\nFINAL ANSWER: <your answer>")
        assert "Final Answer:" not in system  # one convention only: GAIA's marker
        for name in GAIA_TOOL_NAMES:
            assert f"- {name}(" in system
        assert "read_file(path: string, offset: integer = 0)" in system and "    code: The complete program" in system
        assert agent.task_prompt(task).startswith(task.objective) and "Attached file: shopping_list.txt" in agent.task_prompt(task)
        parsed = agent.parser.parse(ModelResponse(text="Thought: 4 + 3\nFINAL ANSWER: 7"))
        assert parsed.ok and parsed.decision.mode == "final" and parsed.decision.final_answer == "7"
        doubled = agent.parser.parse(ModelResponse(text="Thought: sure\nFinal Answer: FINAL ANSWER: 7"))
        evaluation = adapter.evaluate(task, _result(doubled.decision.final_answer), runtime)
        assert evaluation.prediction == "7" and evaluation.success is True
        act = agent.parser.parse(ModelResponse(text='Thought: look\nAction: read_file\nAction Input: {"path": "a.txt"}'))
        assert act.decision.mode == "act" and act.decision.actions[0].arguments == {"path": "a.txt"}
    finally:
        adapter.cleanup(runtime)


def test_tool_calling_recipe_and_missing_runtime(adapter: GaiaAdapter, gaia_root: Path, tmp_path: Path) -> None:
    load = LoadOptions(root=gaia_root)
    task, runtime = _prepare(adapter, gaia_root, tmp_path / "work", index=13)  # no attachment
    try:
        agent = build_tool_calling_agent(RecipeContext(task, runtime, load, {}, lambda name: None))
        assert agent.parser.name == "native_tools_v1" and "FINAL ANSWER: <your answer>" in agent.system_prompt(task)
        assert "Action Input" not in agent.system_prompt(task) and agent.task_prompt(task) == task.objective
        assert isinstance(agent, GaiaAgent) and agent.name == "gaia-tool-calling"
    finally:
        adapter.cleanup(runtime)
    with pytest.raises(ValueError, match=r"--benchmark gaia. prepares \(runtime.handles\['tools'\]\)"):
        build_react_agent(RecipeContext(task, TaskRuntime(), load, {}, lambda name: None))
