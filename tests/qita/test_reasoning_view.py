"""A reasoning model's steps on the board: reasoning in its own collapsible block, diffed on compare.

Two runs of one task by a model that reasons (as vLLM returns `reasoning_content`), made by the real
engine; the run page, the compare page and the HTML export are checked in headless Chromium, with
screenshots under test-artifacts/qita/.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qitos.core import AgentModule, Budget, Engine, Task
from qitos.models.base import ModelResponse, Usage
from qitos.models.scripted import ScriptedModel
from qitos.qita.config import BoardConfig
from qitos.qita.export import export_run_html

from .conftest import screenshot
from .corpus import act, echo, final

expect = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed").expect

THOUGHT_A = "The user wants the word echoed.\nI will call echo with alpha.\nThen answer done."
THOUGHT_B = "The user wants the word echoed.\nMaybe beta is better than alpha?\nThen answer done."
LAST = "Echo worked.\nAnswer now."


def _run(logdir: Path, first_thought: str, word: str) -> str:
    script = [ModelResponse(text=act(word), reasoning=first_thought, model="reasoner",
                            usage=Usage(prompt_tokens=40, completion_tokens=60, total_tokens=100, reasoning_tokens=45)),
              ModelResponse(text=final("done"), reasoning=LAST, model="reasoner",
                            usage=Usage(prompt_tokens=50, completion_tokens=20, total_tokens=70, reasoning_tokens=9))]
    task = Task(id="thinking", objective="Echo a word, then answer done.", budget=Budget(max_steps=5))
    engine = Engine(AgentModule(tools=[echo]), ScriptedModel(script), trace_logdir=logdir, fsync=False)
    return Path(engine.run(task).run_dir).name


@pytest.fixture(scope="module")
def reasoning_board(tmp_path_factory):
    from qitos.qita.server import BoardServer

    root = tmp_path_factory.mktemp("reasoning")
    logdir = root / "runs"
    runs = {"a": _run(logdir, THOUGHT_A, "alpha"), "b": _run(logdir, THOUGHT_B, "beta")}
    server = BoardServer(BoardConfig(logdir=logdir, results=[], port=0, cache_dir=root / "cache")).start()
    yield server, logdir, runs
    server.stop()


def test_reasoning_block_per_step(reasoning_board, page):
    server, _, runs = reasoning_board
    page.goto(server.url(f"/runs/{runs['a']}"))
    assert "reasoning 54" in page.inner_text("main")  # the run's reasoning tokens, beside its other counts
    blocks = page.locator("article.step details.reasoning")
    assert blocks.count() == 2
    first = page.locator("#step-1 details.reasoning")
    assert first.get_attribute("open") is None  # folded: the answer comes first
    assert "45 reasoning tokens" in first.locator("summary").inner_text()
    expect(first.locator("pre.reasoning-text")).to_be_hidden()
    first.locator("summary").click()
    expect(first.locator("pre.reasoning-text")).to_have_text(THOUGHT_A)
    # the model output block shows the answer only
    assert "I will call echo" not in page.locator("#step-1 pre.model-output").inner_text()
    screenshot(page, "reasoning_step")
    assert page.errors == []


def test_compare_diffs_the_reasoning(reasoning_board, page):
    server, _, runs = reasoning_board
    page.goto(server.url(f"/compare?a={runs['a']}&b={runs['b']}"))
    diff = page.locator("#reasoning-diff-1")
    assert diff.count() == 1 and page.locator("#reasoning-diff-2").count() == 0  # step 2 thought the same
    assert "1 line only in A, 1 only in B" in diff.locator("summary").inner_text()
    diff.locator("summary").click()
    expect(diff.locator("pre.diff .del")).to_have_text("- I will call echo with alpha.")
    expect(diff.locator("pre.diff .add")).to_have_text("+ Maybe beta is better than alpha?")
    screenshot(page, "reasoning_compare")
    assert page.errors == []


def test_html_export_has_the_reasoning_block(reasoning_board, page, tmp_path):
    _, logdir, runs = reasoning_board
    out = tmp_path / "run.html"
    export_run_html(logdir / runs["b"], out)
    page.goto(out.as_uri())
    block = page.locator("details.reasoning").first
    block.locator("summary").click()
    expect(block.locator("pre.reasoning-text")).to_contain_text(re.compile("Maybe beta is better"))
    screenshot(page, "reasoning_export")
    assert page.errors == []
