"""`qita export` output opened from file:// with every non-file request blocked shows the same run."""

from __future__ import annotations

import re

import pytest

from qitos.qita.export import export_run_html

from .conftest import screenshot
from .corpus import XSS_IMG, XSS_SCRIPT

expect = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed").expect


def open_offline(page, path):
    requests: list[str] = []

    def guard(route):
        url = route.request.url
        requests.append(url)
        if url.startswith(("file://", "data:")):
            route.continue_()
        else:
            route.abort()

    page.context.route("**/*", guard)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return requests


def test_export_opens_offline_and_replays(page, corpus, tmp_path):
    run = corpus.logdir / corpus.runs["pair_a"]
    out = export_run_html(run, tmp_path / "export" / "run.html")
    requests = open_offline(page, out)
    assert [u for u in requests if not u.startswith(("file://", "data:"))] == []
    assert corpus.runs["pair_a"] in page.inner_text(".run-id")
    assert page.locator("article.step").count() == 4
    assert "done" in page.inner_text("#final-result")
    widths = [img.evaluate("i => i.naturalWidth") for img in page.locator("figure.shot img").all()]
    assert widths == [96, 96, 96, 96]  # screenshots inlined as data URIs
    assert "outside the run directory" in page.inner_text("#step-1")
    screenshot(page, "export_timeline")
    # the replay works offline too: one step at a time with its state
    page.click("[data-tab=replay]")
    visible = page.locator(".frame-inline.current")
    expect(visible).to_have_count(1)
    expect(page.locator("[data-state=step]")).to_have_text("1")
    page.click("#replay-next")
    expect(page.locator("[data-state=step]")).to_have_text("2")
    assert "beta" in visible.inner_text() and page.locator("article.step:visible").count() == 1
    page.keyboard.press("End")
    expect(page.locator("[data-state=step]")).to_have_text("4")
    assert page.inner_text("#replay-pos") == "step 4 / 4"
    screenshot(page, "export_replay")
    page.click("[data-tab=timeline]")
    expect(page.locator("article.step:visible")).to_have_count(4)
    assert page.errors == [] and page.dialogs == []


def test_export_of_hostile_and_broken_runs(page, corpus, tmp_path):
    out = export_run_html(corpus.logdir / corpus.runs["xss"], tmp_path / "xss.html")
    html = out.read_text()
    assert "<script>alert" not in html and "<img src=x" not in html
    assert len(re.findall(r"<script", html)) == 1  # replay.js, allowed by its hash in the CSP
    open_offline(page, out)
    body = page.inner_text("main")
    assert XSS_SCRIPT in body and XSS_IMG in body
    page.wait_for_timeout(200)
    screenshot(page, "export_xss")
    assert page.dialogs == [] and page.errors == []
    broken = export_run_html(corpus.logdir / corpus.runs["torn"], tmp_path / "torn.html")
    page.goto(broken.as_uri())
    assert "torn by a crash" in page.inner_text("main")
