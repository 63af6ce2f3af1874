"""The board as a researcher comparing configurations, in a real browser (Debian Chromium).

Configurations grouped per benchmark and expanded to task runs, per-benchmark plots drawn by
plotly.js served from the installed plotly package, the Experiment page naming A and B by
their RunSpec difference, compare's reproducibility table and spec tree, Tau-Bench
conversations as a chat, empty states, and the plots export opened from file:// with the
network blocked. Every test saves a screenshot to test-artifacts/qita/.
"""

from __future__ import annotations

import re

import pytest

from qitos.qita.config import BoardConfig, discover_results
from qitos.qita.export import render_benchmark_html
from qitos.qita.board import Board

from .conftest import screenshot
from .experiments import build_tau_runs
from .test_export_offline import open_offline

expect = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed").expect
pytest.importorskip("plotly", reason="the plotly package (qitos[board]) is not installed")


@pytest.fixture(scope="module")
def tau_runs(tmp_path_factory, tau_data):
    return build_tau_runs(tmp_path_factory.mktemp("qita-tau"), tau_data)


@pytest.fixture(scope="module")
def tau_board(tau_runs, tmp_path_factory):
    from qitos.qita.server import BoardServer

    config = BoardConfig(logdir=tau_runs.logdir, results=discover_results(tau_runs.logdir), port=0,
                         cache_dir=tmp_path_factory.mktemp("qita-tau-cache"))
    server = BoardServer(config).start()
    yield server
    server.stop()


def wait_for_plots(page, count: int) -> None:
    expect(page.locator(".plot[data-rendered='1']")).to_have_count(count, timeout=20_000)


def test_configurations_are_the_first_level_and_expand_to_task_runs(tau_board, page, tau_runs):
    page.goto(tau_board.url("/"))
    group = page.locator("#bench-tau-bench")
    lines = group.locator("tr.config")
    expect(lines).to_have_count(2)  # the oracle file and the scripted file: one configuration each
    text = group.inner_text()
    assert "oracle" in text and "tool-calling" in text
    assert "3 × 1" in text and "1 × 2" in text  # tasks × trials
    assert "coverage 100.0%" in text and "[" in text  # rate with its interval and coverage
    oracle = lines.filter(has_text="oracle")
    assert "oracle" in oracle.locator("td.official-cell").inner_text()  # the oracle badge beside official
    headline = group.locator(".headline").inner_text()
    assert "configurations" in headline and "best (not oracle)" in headline
    assert "%" not in headline.split("best (not oracle)")[0]  # no pooled success rate across configurations
    oracle.locator("a.expand").click()
    expansion = page.locator("tr.expansion")
    expect(expansion).to_have_count(1)
    expect(expansion.locator("table.config-runs tr")).to_have_count(4)  # header + 3 task runs
    assert expansion.locator("a.run-link").count() == 3
    screenshot(page, "configurations")
    oracle.locator("a.expand").click()
    expect(page.locator("tr.expansion")).to_have_count(0)
    assert page.errors == [] and page.dialogs == []


def test_configuration_page_lists_its_task_runs(tau_board, page):
    page.goto(tau_board.url("/"))
    page.locator("tr.config", has_text="tool-calling").locator("a.config-link").click()
    page.wait_for_url(re.compile(r"/configs/[0-9a-f]{12}$"))
    assert "100.0%" in page.inner_text("#conf-success")
    assert "k=2: 100.0%" in page.inner_text("main")  # pass^k over its two trials
    expect(page.locator("#task-runs table.config-runs tr")).to_have_count(3)
    screenshot(page, "configuration")
    assert page.errors == []


def test_benchmark_page_draws_every_plot(tau_board, page):
    page.goto(tau_board.url("/benchmarks/tau-bench"))
    wait_for_plots(page, 7)  # cost, tokens, bars, steps, latency, tokens distribution, pass^k (no level field)
    # success against tokens: the scripted configuration has tokens 0 → nothing, the oracle too; against cost both
    cost = page.locator("#plot-cost")
    assert cost.locator(".scatterlayer .point").count() == 2  # one marker per configuration
    assert cost.locator(".scatterlayer .errorbar").count() == 2  # each with its interval
    traces = cost.evaluate("el => el.data.map(t => [t.name, t.y.length])")
    assert traces == [["not official", 1], ["oracle (reads gold)", 1], ["Pareto frontier", 1]]  # oracles bound nothing
    bars = page.locator("#plot-bars")
    assert bars.locator(".barlayer .point").count() == 2
    assert bars.locator(".errorbar").count() >= 2  # intervals drawn
    assert page.locator("#plot-passk .scatterlayer .trace").count() == 1  # only the 2-trial configuration
    assert page.locator("#plot-steps .boxlayer .trace").count() == 1  # by default the best that are not oracles
    assert page.locator("#plotly-missing").count() == 0
    page.click(".pick-box summary")  # pick both configurations for the per-configuration plots
    for box in page.locator(".pick-box input[type=checkbox]").all():
        box.check()
    page.click(".pick-box button[type=submit]")
    page.wait_for_url(re.compile(r"\?c=[0-9a-f]{12}&c="))
    wait_for_plots(page, 7)
    assert page.locator("#plot-steps .boxlayer .trace").count() == 2
    screenshot(page, "benchmark_plots")
    # a click on a bar opens its configuration
    bars.locator(".barlayer .point path").first.click(force=True)
    page.wait_for_url(re.compile(r"/configs/[0-9a-f]{12}$"))
    assert page.errors == []


def test_benchmarks_summary(tau_board, page):
    page.goto(tau_board.url("/benchmarks"))
    row = page.locator("table.benchmarks tr", has_text="tau-bench")
    assert "tool-calling" in row.inner_text()  # the best configuration that is not an oracle
    wait_for_plots(page, 1)
    assert page.locator("#plot-per-benchmark .barlayer .point").count() == 1
    screenshot(page, "benchmarks")
    assert page.errors == []


def test_experiment_names_sides_and_warns(tau_board, page, tau_runs):
    names = [p.name for p in tau_board.config.results]
    oracle, scripted = names.index(next(n for n in names if "oracle" in n)), names.index("scripted.jsonl")
    page.goto(tau_board.url(f"/experiment?f={oracle}&f={scripted}"))
    sides = page.inner_text("#sides")
    assert "metadata.recipe=oracle" in page.inner_text("#name-a")
    assert "metadata.recipe=tool-calling" in page.inner_text("#name-b")
    assert "is an oracle" in sides and "not an official run" in sides
    assert "B − A" in sides
    assert page.locator("#no-test").count() == 0  # same benchmark, one shared task
    assert "0.0 pts" in page.inner_text("#difference")
    screenshot(page, "experiment_ab")
    assert page.errors == []


def test_experiment_refuses_a_test_across_benchmarks(tau_runs, corpus, tmp_path):
    from starlette.testclient import TestClient

    from qitos.qita.app import build_app

    config = BoardConfig(logdir=tau_runs.logdir, results=[tau_runs.results[0], corpus.results[0]], cache_dir=tmp_path)
    app = build_app(config)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        html = client.get("/experiment?f=0&f=1").text
    app.state.board.index.close()
    assert "different benchmarks share no tasks, so no paired test is shown" in html
    assert 'id="mcnemar"' not in html and 'id="difference"' not in html


def test_compare_shows_reproducibility_and_a_spec_tree(tau_board, page, tau_runs):
    scripted = tau_runs.conversation_run
    oracle = tau_runs.oracle_runs["tau_retail_test_00001"]
    page.goto(tau_board.url(f"/compare?a={oracle}&b={scripted}"))
    metrics = page.inner_text("table.compare-metrics")
    assert "success" in metrics and "score" in metrics
    repro = page.locator("#reproducibility")
    assert repro.locator("tr.equal").count() >= 5 and repro.locator("tr.differs").count() >= 1
    assert "= equal" in repro.locator("tr", has_text="benchmark").first.inner_text()
    tree = page.locator("#config ul.spec-tree").first
    changed = tree.locator("li.changed[data-path='metadata.recipe']")
    expect(changed).to_be_visible()
    assert "oracle" in changed.inner_text() and "tool-calling" in changed.inner_text()
    folded = tree.locator("li[data-path='tool_manifest'] > details")
    assert folded.get_attribute("open") is None  # tool_manifest stays folded
    screenshot(page, "compare_configuration")
    assert page.errors == []


def test_run_page_spec_is_a_collapsible_tree(tau_board, page, tau_runs):
    page.goto(tau_board.url(f"/runs/{tau_runs.conversation_run}"))
    page.click("section.specs summary:has-text('RunSpec')")
    tree = page.locator("section.specs ul.spec-tree").first
    expect(tree).to_be_visible()
    top = tree.locator(":scope > li")
    assert 10 <= top.count() <= 40  # a tree, not one row per flattened field
    tools = tree.locator("li[data-path='tool_manifest'] > details")
    assert tools.get_attribute("open") is None
    assert not tree.locator("li[data-path^='tool_manifest.']").first.is_visible()
    tree.locator("li[data-path='generation'] > details > summary").click() if tree.locator(
        "li[data-path='generation'] > details:not([open])").count() else None
    screenshot(page, "run_spec_tree")
    assert page.errors == []


def test_tau_conversation_reads_as_a_chat(tau_board, page, tau_runs):
    page.goto(tau_board.url(f"/runs/{tau_runs.conversation_run}"))
    conv = page.locator("#conversation")
    assert "retail customer-service agent" in conv.locator("#instruction").inner_text()
    instruction = conv.locator("#user-instruction").inner_text()
    assert "User instruction" in instruction and "Yusuf Rossi" in instruction  # what the simulated user was told
    users = conv.locator(".msg.user")
    expect(users).to_have_count(2)
    assert "exchange my thermostat" in users.first.inner_text()
    assert "ended the conversation" in users.last.inner_text()
    agent = conv.locator(".msg.agent")
    expect(agent).to_have_count(1)
    assert "exchange is requested" in agent.inner_text()
    tools = conv.locator("details.msg.tool")
    expect(tools).to_have_count(2)
    first = tools.first
    assert "find_user_id_by_name_zip" in first.locator("summary").inner_text()
    assert not first.locator("pre").first.is_visible()  # folded
    first.locator("summary").click()
    expect(first.locator("pre").last).to_contain_text("yusuf_rossi_9620")
    assert "scripted" in conv.inner_text()  # who played the user
    assert "the user's reply" in page.inner_text("#steps").lower()  # respond's result is the user, not an observation
    screenshot(page, "conversation")
    assert page.errors == []


def test_empty_states_say_what_to_do(page, tau_runs, tmp_path):
    from qitos.qita.server import BoardServer

    # the folder above runs/: the board points at runs/
    server = BoardServer(BoardConfig(logdir=tau_runs.root, port=0, cache_dir=tmp_path / "c1")).start()
    try:
        page.goto(server.url("/"))
        note = page.inner_text("#empty-state")
        assert "No runs here" in note and f"under {tau_runs.logdir}" in note and "qita board --logdir" in note
        assert re.search(r"Found \d+ runs under", note)
        screenshot(page, "empty_folder_above_runs")
    finally:
        server.stop()
    # one run folder
    one = tau_runs.logdir / tau_runs.conversation_run
    server = BoardServer(BoardConfig(logdir=one, port=0, cache_dir=tmp_path / "c2")).start()
    try:
        page.goto(server.url("/"))
        assert "This folder is one run" in page.inner_text("#empty-state")
        page.goto(server.url("/runs"))
        assert "No runs in" in page.inner_text("#runs-empty")
    finally:
        server.stop()
    # nothing at all
    empty = tmp_path / "nothing"
    empty.mkdir()
    server = BoardServer(BoardConfig(logdir=empty, port=0, cache_dir=tmp_path / "c3")).start()
    try:
        page.goto(server.url("/"))
        assert "qit bench run" in page.inner_text("#empty-state")
    finally:
        server.stop()
    assert page.errors == []


def test_runs_filter_with_no_match_says_so(board_server, page):
    page.goto(board_server.url("/runs?q=no-such-thing-anywhere"))
    text = page.inner_text("#runs-empty")
    assert "No runs match these filters" in text and "in all" in text


def test_plots_export_opens_offline(page, tau_runs, tmp_path):
    board = Board(BoardConfig(logdir=tau_runs.logdir, results=discover_results(tau_runs.logdir), cache_dir=tmp_path))
    try:
        board.refresh(force=True)
        out = tmp_path / "tau-plots.html"
        out.write_text(render_benchmark_html(board, "tau-bench"), encoding="utf-8")
    finally:
        board.index.close()
    requests = open_offline(page, out)
    wait_for_plots(page, 7)
    assert [u for u in requests if not u.startswith(("file://", "data:"))] == []
    assert page.locator("#plot-bars .barlayer .point").count() == 2
    assert page.locator("nav a").count() == 0 and page.locator("a[href^='/']").count() == 0  # no links into a board
    assert page.locator("#bench-configs tr").count() == 3  # the configurations table travels with the plots
    screenshot(page, "export_plots")
    assert page.errors == [] and page.dialogs == []


def test_cli_exports_a_benchmarks_plots(tau_runs, tmp_path):
    from .test_cli import qita

    out = tmp_path / "plots.html"
    done = qita("export", "--benchmark", "tau-bench", "--logdir", tau_runs.logdir, "--cache-dir", tmp_path / "c",
                "--html", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert "Content-Security-Policy" in html and 'id="fig-cost"' in html and "plotly.js v" in html
    assert "<script src=" not in html and '<link rel="stylesheet" href=' not in html  # everything inline
    wrong = qita("export", "--benchmark", "nope", "--logdir", tau_runs.logdir, "--cache-dir", tmp_path / "c",
                 "--html", out, cwd=tmp_path)
    assert wrong.returncode == 2 and "benchmarks here: tau-bench" in wrong.stderr and "Traceback" not in wrong.stderr
    both = qita("export", "--html", out, cwd=tmp_path)
    assert both.returncode == 2 and "either --run DIR" in both.stderr


def test_level_bars_and_frontier_with_costs(page, tmp_path):
    """Rows with a level and real costs (the shape GAIA rows have): per-level bars and a frontier drawn."""
    from qitos.qita.server import BoardServer

    from .test_configs import board_for

    board, _ = board_for(tmp_path)
    board.index.close()
    config = BoardConfig(logdir=tmp_path / "runs", results=discover_results(tmp_path / "runs"), port=0,
                         cache_dir=tmp_path / "cache2")
    server = BoardServer(config).start()
    try:
        page.goto(server.url("/benchmarks/gaia"))
        wait_for_plots(page, 8)
        levels = page.locator("#plot-levels")
        assert levels.locator(".barlayer .trace").count() == 2  # one colour per (non-oracle) configuration
        assert levels.evaluate("el => el.data[0].x") == ["1", "2"]  # the two levels
        frontier = page.locator("#plot-cost").evaluate("el => el.data.find(t => t.name === 'Pareto frontier').x.length")
        assert frontier >= 1
        screenshot(page, "benchmark_levels")
    finally:
        server.stop()
    assert page.errors == []


def test_tick_two_configurations_and_compare_them(tau_board, page):
    page.goto(tau_board.url("/"))
    button = page.locator("#compare-configs button")
    assert button.is_disabled()
    for box in page.locator("input[form='compare-configs']").all():
        box.check()
    assert button.is_enabled()
    button.click()
    page.wait_for_url(re.compile(r"/experiment\?c=[0-9a-f]{12}&c=[0-9a-f]{12}"))
    assert "Comparing configurations" in page.inner_text("#comparing-configurations")
    assert "metadata.recipe=" in page.inner_text("#name-a") and "is an oracle" in page.inner_text("#sides")
    expect(page.locator("#difference")).to_contain_text("pts")
    screenshot(page, "experiment_configurations")
    assert page.errors == []


def test_two_configurations_of_one_results_file(tmp_path):
    """Two RunSpecs appended to one file (--force) are still two sides of a paired comparison."""
    from starlette.testclient import TestClient

    from qitos.qita.app import build_app

    from .test_configs import board_for

    board, mixed = board_for(tmp_path)
    ids = {c.run_spec_ref: c.id for c in board.configs.all() if c.source == mixed}
    board.index.close()
    app = build_app(BoardConfig(logdir=tmp_path / "runs", results=discover_results(tmp_path / "runs"),
                                cache_dir=tmp_path / "cache3"))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        html = client.get(f"/experiment?c={ids['aaaa']}&c={ids['bbbb']}").text
    app.state.board.index.close()
    assert 'id="mcnemar"' in html and 'id="difference"' in html  # they share tasks t0 and t1
    assert "model=m1" in html and "model=m2" in html  # named by what differs (rows only: no traces)


def test_run_export_keeps_the_conversation_offline(page, tau_runs, tmp_path):
    from qitos.qita.export import export_run_html

    out = export_run_html(tau_runs.logdir / tau_runs.conversation_run, tmp_path / "conv.html")
    requests = open_offline(page, out)
    assert [u for u in requests if not u.startswith(("file://", "data:"))] == []
    conv = page.locator("#conversation")
    expect(conv.locator(".msg.user")).to_have_count(2)
    assert "Yusuf Rossi" in conv.locator("#user-instruction").inner_text()
    conv.locator("details.msg.tool summary").first.click()
    expect(conv.locator("details.msg.tool pre").nth(1)).to_contain_text("yusuf_rossi_9620")
    screenshot(page, "export_conversation")
    assert page.errors == [] and page.dialogs == []


def test_qita_board_finds_the_results_beside_runs(tau_runs, tmp_path):
    from .test_cli import _get, _start

    proc, lines = _start(["board", "--logdir", tau_runs.logdir, "--port", "0"], tmp_path)
    try:
        assert any(line.startswith(f"results files: 2 found in {tau_runs.root / 'results'}") for line in lines)
        status, body = _get(lines[-1].removeprefix("open "))
        assert status == 200 and body.count('class="config"') == 2 and "scripted.jsonl" in body
    finally:
        proc.terminate()
        proc.wait(timeout=10)
