"""End to end without a model: run every scripted solution with the real tools and score it."""

from __future__ import annotations

from pathlib import Path

import pytest

from qitos.benchmark.gaia import extract_final_answer, load_gaia, score_answer
from qitos.benchmark.gaia.prompt import GAIA_SYSTEM_PROMPT, build_user_prompt
from qitos.benchmark.gaia.tools import gaia_tools

from .make_fixture import QUESTIONS, SCRIPTED_SOLUTIONS, build_gaia_fixture
from tests.conftest import require_system

LEVELS = {level for _, level, *_ in QUESTIONS}
SUFFIXES = {Path(q[3]).suffix for q in QUESTIONS if q[3]}


def test_fixture_shape() -> None:
    assert len(QUESTIONS) >= 12 and LEVELS == {1, 2, 3}
    assert {".txt", ".md", ".csv", ".json", ".jsonld", ".xlsx", ".docx", ".pptx", ".pdf", ".zip", ".png",
            ".jpg"} <= SUFFIXES
    assert set(SCRIPTED_SOLUTIONS) == {q[0] for q in QUESTIONS}
    for steps in SCRIPTED_SOLUTIONS.values():
        assert "final" in steps[-1] and all("tool" in s and "arguments" in s for s in steps[:-1])


def _needs_sandbox(steps: list[dict[str, object]]) -> bool:
    return any(step.get("tool") == "run_python" for step in steps)


@pytest.fixture(scope="module")
def gaia_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gaia_fixture(tmp_path_factory.mktemp("gaia"))


@pytest.mark.parametrize("task_id", sorted(SCRIPTED_SOLUTIONS))
def test_scripted_solution_is_correct(gaia_root: Path, tmp_path: Path, task_id: str) -> None:
    steps = SCRIPTED_SOLUTIONS[task_id]
    if _needs_sandbox(steps):
        from qitos.sandbox.bwrap import BwrapSandbox

        ok, reason = BwrapSandbox.available()
        require_system(ok, f"the bubblewrap sandbox: {reason}")
    question = next(q for q in load_gaia(gaia_root, "validation") if q.task_id == task_id)
    attachments = [question.file_path] if question.file_path else []
    tools = {t.name: t for t in gaia_tools(tmp_path / "work", attachments)}
    for step in steps[:-1]:
        output = tools[step["tool"]].invoke(step["arguments"])
        assert step["expect"] in output, f"{step['tool']} output lacks {step['expect']!r}:\n{output}"
    reply = f"I have checked the evidence.\nFINAL ANSWER: {steps[-1]['final']}"
    assert question.final_answer is not None
    assert score_answer(extract_final_answer(reply), question.final_answer) is True


def test_prompts(gaia_root: Path) -> None:
    assert "FINAL ANSWER:" in GAIA_SYSTEM_PROMPT and "thousands separators" in GAIA_SYSTEM_PROMPT
    assert "articles" in GAIA_SYSTEM_PROMPT and "commas" in GAIA_SYSTEM_PROMPT
    with_file, without_file = load_gaia(gaia_root)[0], load_gaia(gaia_root)[13]
    assert build_user_prompt(with_file).endswith("open it with read_file, or process it with run_python).")
    assert "shopping_list.txt" in build_user_prompt(with_file)
    assert build_user_prompt(without_file) == without_file.question
