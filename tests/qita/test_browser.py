"""The board in a real browser (headless Chromium via Playwright) against a board on loopback.

Each test saves a screenshot to test-artifacts/qita/<name>.png.
"""

from __future__ import annotations

import re

import pytest

from .conftest import screenshot
from .corpus import XSS_IMG, XSS_SCRIPT

expect = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed").expect


def test_filter_the_run_list(board_server, page, corpus):
    page.goto(board_server.url("/runs"))
    total = int(page.inner_text("#total-runs"))
    assert total >= 20
    page.select_option("select[name=benchmark]", "jsonl")  # applies on change
    page.wait_for_url(re.compile(r"benchmark=jsonl"))
    assert page.inner_text("#total-runs") == "12"
    page.select_option("select[name=success]", "no")
    page.wait_for_url(re.compile(r"success=no"))
    assert page.inner_text("#total-runs") == "3"
    assert sorted(page.locator("a.run-link").all_inner_texts()) == ["t1", "t3", "t5"]
    page.goto(board_server.url("/runs"))
    page.fill("input[name=q]", "budget")
    page.press("input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"q=budget"))
    assert page.locator("a.run-link").all_inner_texts() == ["budget-task"]
    page.goto(board_server.url("/runs?sort=steps&order=desc&per_page=25"))
    assert page.locator("a.run-link").first.inner_text() == "long-task"
    assert page.locator("text=corrupt manifest.json").count() == 1  # the bad run is listed, marked
    page.goto(board_server.url("/runs?benchmark=jsonl&success=no"))
    screenshot(page, "runs_filtered")
    assert page.errors == [] and page.dialogs == []


def test_open_a_run_and_step_through_replay(board_server, page, corpus):
    page.goto(board_server.url("/runs?q=divergent&sort=run&order=asc"))
    page.click(f"a.run-link[href='/runs/{corpus.runs['pair_a']}']")
    page.wait_for_url(re.compile(corpus.runs["pair_a"]))
    assert page.locator("article.step").count() == 4
    shot = page.locator("#step-1 figure.shot img")  # loaded (a busy machine may still be fetching it), then measured
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=shot.element_handle(), timeout=15000)
    assert shot.evaluate("img => img.naturalWidth") == 96
    assert "outside the run directory" in page.inner_text("#step-1")  # the ../../etc/passwd asset
    screenshot(page, "run_page")
    page.click("#open-replay")
    page.wait_for_url(re.compile(r"/replay"))
    pos = page.locator("#replay-pos")
    assert pos.inner_text() == "step 1 / 4"
    page.click("#replay-next")
    expect(page.locator("#state-step")).to_have_text("2")
    assert pos.inner_text() == "step 2 / 4" and "beta" in page.inner_text("#replay-stage")
    page.click("#replay-next")
    expect(page.locator("#state-step")).to_have_text("3")
    page.click("#replay-prev")
    expect(page.locator("#state-step")).to_have_text("2")
    assert "?step=2" in page.url
    page.keyboard.press("ArrowRight")
    expect(page.locator("#state-step")).to_have_text("3")
    page.select_option("#replay-speed", "8")
    assert page.locator("#replay-pause").is_hidden()
    page.click("#replay-play")
    assert page.locator("#replay-pause").is_visible() and page.locator("#replay-play").is_hidden()
    expect(page.locator("#state-step")).to_have_text("4")
    page.wait_for_selector("#replay-play", state="visible")  # stops by itself at the last step
    assert page.locator("#replay-pause").is_hidden()
    assert pos.inner_text() == "step 4 / 4" and "final answer" in page.inner_text("#replay-stage")
    page.click("[data-action=first]")
    expect(page.locator("#state-step")).to_have_text("1")
    screenshot(page, "replay")
    assert page.errors == []


def test_compare_two_runs_shows_the_diverging_step(board_server, page, corpus):
    a, b = corpus.runs["pair_a"], corpus.runs["pair_b"]
    page.goto(board_server.url("/runs?q=divergent"))
    compare = page.locator("#compare-form button")
    assert compare.is_disabled()
    page.check(f"input[name=run][value='{a}']")
    page.check(f"input[name=run][value='{b}']")
    assert compare.is_enabled()
    compare.click()
    page.wait_for_url(re.compile(r"/compare\?"))
    note = page.inner_text("#divergence-note")
    assert "First divergence at step 3" in note and "different arguments" in note
    diverged = page.locator(".pair.diverged")
    assert diverged.count() == 1 and "gamma" in diverged.inner_text() and "DELTA" in diverged.inner_text()
    config = page.inner_text("#config")
    assert "3 differing fields" in config  # the RunSpec diff tree opens on what changed
    for path in ("stop_criteria.parse_error_limit", "seed"):
        expect(page.locator(f"#config ul.spec-tree li.changed[data-path='{path}']")).to_be_visible()
    page.click("#divergence-note a")
    screenshot(page, "compare")
    assert page.errors == []


def test_experiment_with_two_results_files(board_server, page, corpus):
    page.goto(board_server.url("/experiment"))
    assert page.inner_text("#both strong") == "3" and page.inner_text("#only-a strong") == "3"
    assert page.inner_text("#only-b strong") == "0" and page.inner_text("#neither strong") == "0"
    assert "p = 0.2500" in page.inner_text("#mcnemar") and "exact binomial" in page.inner_text("#mcnemar")
    assert "-50.0 pts" in page.inner_text("#difference") and "95% CI" in page.inner_text("#difference")
    screenshot(page, "experiment")
    page.locator(".result-set").nth(1).locator(".cell-bad a").first.click()  # a failed cell opens its trace
    page.wait_for_url(re.compile(r"/runs/jsonl_t"))
    assert "certainly not" in page.inner_text("#final-result")
    assert page.errors == []


def test_trace_text_renders_as_text_and_no_dialog_fires(board_server, page, corpus):
    name = corpus.runs["xss"]
    page.goto(board_server.url(f"/runs/{name}"))
    body = page.inner_text("main")
    assert XSS_SCRIPT in body and XSS_IMG in body  # shown literally
    assert page.locator("main script").count() == 0 and page.locator("main img[src=x]").count() == 0
    screenshot(page, "xss_run")
    page.goto(board_server.url(f"/runs/{name}/replay"))
    page.click("#replay-next")
    expect(page.locator("#state-step")).to_have_text("2")
    assert XSS_SCRIPT in page.inner_text("#replay-stage")
    page.click("#replay-next")
    expect(page.locator("#state-step")).to_have_text("3")
    assert XSS_IMG in page.inner_text("#replay-stage")
    page.goto(board_server.url(f"/compare?a={name}&b={corpus.runs['pair_a']}"))
    page.goto(board_server.url("/runs?q=xss"))
    page.wait_for_timeout(300)
    assert page.dialogs == [] and page.errors == []


def test_traversal_requests_get_404_in_the_browser(board_server, page, corpus):
    run = corpus.runs["pair_a"]
    for path in ("..%2F..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e/%2e%2e/manifest.json", "screens/../../../x"):
        response = page.goto(board_server.url(f"/runs/{run}/files/{path}"))
        assert response.status == 404, path
    ok = page.goto(board_server.url(f"/runs/{run}/files/screens/step2.png"))
    assert ok.status == 200 and ok.headers["content-type"] == "image/png"
    missing = page.goto(board_server.url("/runs/does-not-exist"))
    assert missing.status == 404 and "no run" in page.inner_text("main")
    screenshot(page, "not_found")
