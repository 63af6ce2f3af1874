"""How the qita board scales: 10,000 runs in 300 configurations and one run of 5,000 steps.

Writes a synthetic logdir (manifest, events and steps files written directly, in the trace
format), then reports:

- index build time (cold, from nothing) and an incremental refresh (nothing changed);
- the configurations list (grouped, the home page), the benchmarks page and one benchmark's
  plots page: first load (cold caches) and warm loads;
- the task runs page: first load and warm loads, unfiltered and filtered+sorted, and a deep page;
- the long run's page (paginated) and a replay frame deep into it;
- the server's peak resident memory (VmHWM), measured on a real `qita board` process.

Targets: grouped list and plots first load < 300 ms, runs page < 300 ms warm, run page of the
long run < 500 ms. 296 configurations come from results files under `results/` (found by
`qita board` next to `runs/`), 4 are traces no results file names.

    .venv/bin/python benchmarks/board_scale.py [--runs 10000] [--long-steps 5000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import datetime, timedelta, timezone
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

BENCHMARKS = [("tau-bench", "retail"), ("tau-bench", "airline"), ("gaia", "validation"), ("cybench", "test")]
MODELS = ["gpt-4o-mini", "qwen2.5-7b-instruct", "llama-3.1-8b", "claude-3-5-haiku"]
STOPS = ["final"] * 6 + ["budget_steps", "parse_error_limit", "tool_error_limit", "model_error", "error"]
RECIPES = ["react", "tool-calling", "oracle"]
CONFIGS = 300
LOOSE_CONFIGS = 4  # configurations whose traces no results file names


def config_of(i: int) -> int:
    return i % CONFIGS


def fingerprint(c: int) -> str:
    return hashlib.sha256(f"config {c}".encode()).hexdigest()[:16]


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def manifest(run_id: str, i: int, rng: random.Random, steps: int, created: datetime) -> dict:
    c = config_of(i)
    bench, split = BENCHMARKS[c % len(BENCHMARKS)]
    model = MODELS[(c // 4) % len(MODELS)]
    recipe = RECIPES[(c // 16) % len(RECIPES)]
    stop = rng.choice(STOPS)
    status = "completed" if stop in ("final", "budget_steps", "parse_error_limit", "tool_error_limit") else "failed"
    if i % 97 == 0:
        status, stop = "running", None  # a dead writer: shows as interrupted
    tokens = rng.randint(500, 60000)
    cost = round(tokens * 0.0000006, 6)
    spec = {"model_name": model, "model_family": "openai_compat", "model_provider": "openai_compat",
            "generation": {"temperature": 0.0}, "prompt_protocol": "react_text_v1", "parser_name": "react_text_v1",
            "toolset_name": bench, "tool_manifest": [{"name": f"tool{k}", "description": "a tool " * 8} for k in range(6)],
            "environment": {"python": "3.11.7", "platform": "linux-x86_64", "qitos": "0.1.0"}, "seed": i % 5,
            "budget": {"max_steps": 30}, "git_sha": "0" * 40, "package_version": "0.1.0",
            "benchmark_name": bench, "benchmark_split": split, "dataset_digest": "sha256:" + "ab" * 32,
            "metadata": {"recipe": recipe, "recipe_official": recipe != "oracle"}, "fingerprint": fingerprint(c)}
    return {
        "run_id": run_id, "schema_version": "qitos.trace.v1", "status": status, "created_at": _iso(created),
        "updated_at": _iso(created + timedelta(seconds=30)), "step_count": steps, "event_count": steps * 5 + 4,
        "summary": {"stop_reason": stop, "final_result": f"answer {i}", "steps": steps,
                    "token_usage": {"total_tokens": tokens}, "latency_seconds": rng.random() * 90, "cost": cost},
        "model_id": model, "model_family": "openai_compat", "prompt_protocol": "react_text_v1",
        "parser_name": "react_text_v1", "benchmark_name": bench, "benchmark_split": split, "run_spec": spec,
        "experiment_spec": {"name": f"{bench}:{split}", "benchmark_name": bench, "benchmark_split": split},
        "official_run": i % 3 == 0, "official_checks": [{"check": "run_spec_complete", "passed": True, "detail": ""}],
        "replay_mode": "best_effort", "token_usage": {"total_tokens": tokens, "prompt_tokens": tokens - 200,
                                                       "completion_tokens": 200, "cached_tokens": 0},
        "latency_seconds": rng.random() * 90, "cost": cost, "seed": i % 5,
        "task": {"id": f"task-{i % 2500:04d}", "objective": f"Solve task {i % 2500} of {bench} carefully.", "metadata": {}},
        "writer": {"pid": 1, "host": "elsewhere"},
    }


def step_record(n: int, rng: random.Random) -> dict:
    text = f"Thought: step {n} needs a look at the file.\nAction: read\nAction Input: {{\"path\": \"f{n}.txt\"}}"
    return {"step_id": n, "observation": [f"contents of f{n}.txt: " + "lorem ipsum " * rng.randint(5, 60)],
            "model_input_hash": f"{n:016x}",
            "model_response": {"text": text, "tool_calls": [], "usage": {"total_tokens": 900}, "cost": 0.0005,
                               "latency_seconds": 0.8, "model": "gpt-4o-mini", "finish_reason": "stop"},
            "decision": {"mode": "act", "actions": [{"name": "read", "arguments": {"path": f"f{n}.txt"}}],
                         "final_answer": None},
            "action_results": [], "tool_invocations": [{"name": "read", "arguments": {"path": f"f{n}.txt"},
                                                        "status": "ok", "latency_ms": 3.2, "error": None}],
            "parser": {"name": "react_text_v1", "ok": True, "diagnostics": []},
            "usage": {"total_tokens": 900}, "cost": 0.0005, "latency_seconds": 0.9, "state_diff": None,
            "visual_assets": []}


def events_for(run_id: str, n: int, seq: int) -> list[dict]:
    base = {"run_id": run_id, "step_id": n, "ok": True, "ts": "2026-01-01T00:00:00.000Z", "error": None}
    kinds = [("model_request", "DECIDE", {"messages_hash": f"{n:016x}", "message_count": 2 * n,
                                          "last_message": {"role": "user", "content": "Observation: ..."}}),
             ("model_response", "DECIDE", {"text": "Thought: ...", "usage": {"total_tokens": 900}}),
             ("parse_result", "DECIDE", {"ok": True}), ("tool_call", "ACT", {"name": "read"}),
             ("tool_result", "ACT", {"name": "read", "status": "ok", "output": "lorem ipsum " * 20})]
    return [{**base, "seq": seq + k, "phase": phase, "kind": kind, "payload": payload}
            for k, (kind, phase, payload) in enumerate(kinds)]


def write_run(logdir: Path, run_id: str, i: int, rng: random.Random, steps: int, created: datetime) -> None:
    run = logdir / run_id
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps(manifest(run_id, i, rng, steps, created)))
    with open(run / "steps.jsonl", "w") as st, open(run / "events.jsonl", "w") as ev:
        seq = 1
        for n in range(1, steps + 1):
            st.write(json.dumps(step_record(n, rng)) + "\n")
            for e in events_for(run_id, n, seq):
                ev.write(json.dumps(e) + "\n")
            seq += 5


def result_row(i: int, run_id: str, logdir: Path, rng: random.Random) -> dict:
    """The results row of run i: one of 11 tasks × 3 trials of its configuration."""
    c = config_of(i)
    bench, split = BENCHMARKS[c % len(BENCHMARKS)]
    recipe = RECIPES[(c // 16) % len(RECIPES)]
    n = i // CONFIGS
    p = 1.0 if recipe == "oracle" else 0.15 + 0.7 * ((c * 37) % 100) / 100
    tokens = 0 if recipe == "oracle" else rng.randint(2000, 40000) * (1 + c % 3)
    return {"task_id": f"task-{n % 11:02d}", "benchmark": bench, "split": split, "subset": None, "trial": n // 11,
            "model": None if recipe == "oracle" else MODELS[(c // 4) % len(MODELS)], "recipe": recipe,
            "success": rng.random() < p, "score": None, "stop_reason": rng.choice(STOPS), "steps": rng.randint(1, 30),
            "latency_seconds": rng.random() * 90, "token_usage": {"total_tokens": tokens},
            "cost": round(tokens * 0.0000006, 6), "trace_run_dir": str(logdir / run_id), "run_spec_ref": fingerprint(c),
            "selected_tasks": 11, "trials_requested": 3, "metadata": {"level": 1 + n % 3} if bench == "gaia" else {}}


def build(root: Path, runs: int, long_steps: int) -> tuple[Path, list[Path], str]:
    logdir = root / "runs"
    logdir.mkdir(parents=True)
    (root / "results").mkdir()
    rng = random.Random(7)
    start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    rows: dict[int, list[dict]] = {}
    for i in range(runs):
        run_id = f"bench_task-{i % 2500:04d}_{i // 2500}_{(start + timedelta(minutes=i)).strftime('%Y%m%dT%H%M%S')}_{i:06x}"
        write_run(logdir, run_id, i, rng, 2, start + timedelta(minutes=i))
        if config_of(i) < CONFIGS - LOOSE_CONFIGS:
            rows.setdefault(config_of(i), []).append(result_row(i, run_id, logdir, rng))
    long_id = "long_run_0_20260201T000000_abcdef"
    write_run(logdir, long_id, runs, rng, long_steps, start)
    results = []
    for c, group in sorted(rows.items()):
        path = root / "results" / f"config_{c:03d}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in group))
        results.append(path)
    return logdir, results, long_id


def timed_get(url: str) -> tuple[float, int, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as response:
        body = response.read()
        status = response.status
    return (time.perf_counter() - started) * 1000, status, len(body)


def measure(url: str, repeat: int = 7) -> dict:
    first, status, size = timed_get(url)
    assert status == 200, url
    warm = [timed_get(url)[0] for _ in range(repeat)]
    return {"first_ms": round(first, 1), "warm_median_ms": round(statistics.median(warm), 1),
            "warm_max_ms": round(max(warm), 1), "bytes": size}


def browser_times(base: str, chromium: str = "/usr/bin/chromium") -> dict:
    """Time to a usable page in a real browser (fresh context: nothing cached), when Chromium is here."""
    if not Path(chromium).exists():
        return {"skipped": f"no browser at {chromium}"}
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return {"skipped": "playwright not installed"}
    out = {}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, args=["--no-sandbox", "--disable-gpu"])
        context = browser.new_context()
        for label, path, plots in (("configurations_page", "/", 0), ("gaia_plots_page", "/benchmarks/gaia", 8),
                                   ("gaia_plots_page_again", "/benchmarks/gaia", 8)):
            if label != "gaia_plots_page_again":  # "again": same browser profile, plotly.js already compiled
                context = browser.new_context()
            page = context.new_page()
            started = time.perf_counter()
            page.goto(base + path, wait_until="commit")
            if plots:
                page.locator(".plot[data-rendered]").nth(plots - 1).wait_for(state="attached", timeout=60_000)
            else:
                page.wait_for_load_state("load")
            drawn = (time.perf_counter() - started) * 1000
            usable = page.evaluate("performance.getEntriesByType('navigation')[0].domInteractive")
            out[label] = {"page_usable_ms": round(usable, 1), "plots_drawn_ms" if plots else "loaded_ms": round(drawn, 1)}
        browser.close()
    return out


def first_config(base: str) -> str:
    with urllib.request.urlopen(base + "/?benchmark=cybench", timeout=60) as response:
        html = response.read().decode()
    match = re.search(r'data-expand="([0-9a-f]{12})"', html)
    assert match, "no configuration on the home page"
    return match.group(1)


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--long-steps", type=int, default=5_000)
    parser.add_argument("--keep", type=Path, help="build the logdir here and keep it")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="qita-scale-"))
    if args.keep and root.exists():
        shutil.rmtree(root)
    report: dict = {"runs": args.runs, "long_steps": args.long_steps}
    started = time.perf_counter()
    logdir, results, long_id = build(root, args.runs, args.long_steps)
    report["build_logdir_s"] = round(time.perf_counter() - started, 2)

    from qitos.qita.config import BoardConfig
    from qitos.qita.index import RunIndex

    config = BoardConfig(logdir=logdir, results=results, cache_dir=root / "cache-inproc")
    started = time.perf_counter()
    index = RunIndex(config.logdir, config.index_path(), config.results)
    index.refresh(force=True)
    report["index_build_cold_s"] = round(time.perf_counter() - started, 3)
    started = time.perf_counter()
    stats = index.refresh(force=True)
    report["index_refresh_nothing_changed_ms"] = round((time.perf_counter() - started) * 1000, 1)
    report["index_rows"] = index.count()
    assert stats is not None and stats.parsed == sum(1 for r in index.query("SELECT name FROM runs WHERE live = 1"))
    index.close()
    from qitos.qita.board import Board
    from qitos.qita.views.configs import benchmark_context

    board = Board(config)
    board.refresh(force=True)
    started = time.perf_counter()
    report["configurations"] = len(board.configs.all())  # what the server does at start or when a file changes
    report["configurations_build_cold_ms"] = round((time.perf_counter() - started) * 1000, 1)
    started = time.perf_counter()
    figures = benchmark_context(board, "gaia", [])["figures"]
    report["gaia_figures_build_ms"] = round((time.perf_counter() - started) * 1000, 1)
    report["gaia_figures"] = len(figures)
    board.index.close()

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    started = time.perf_counter()
    server = subprocess.Popen(
        [sys.executable, "-m", "qitos.cli.qita", "board", "--logdir", str(logdir),  # results/ found beside runs/
         "--port", "0", "--cache-dir", str(root / "cache-server")],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        base = ""
        for line in server.stdout:
            if line.startswith("open "):
                base = line.split()[1].rstrip("/")
                break
        if not base:
            raise SystemExit("the board did not start")
        report["server_start_with_cold_index_s"] = round(time.perf_counter() - started, 2)
        report["baseline_healthz"] = measure(base + "/healthz")  # the same server answering with no page work
        report["configurations_page"] = measure(base + "/")
        report["configurations_filtered_sorted"] = measure(base + "/?benchmark=gaia&sort=cost&q=react")
        report["configuration_expanded_runs"] = measure(base + "/configs/" + first_config(base) + "/runs")
        report["benchmarks_page_with_plot"] = measure(base + "/benchmarks")
        report["benchmark_plots_page"] = measure(base + "/benchmarks/gaia")
        report["plotly_js"] = measure(base + "/vendor/plotly.min.js", repeat=2)
        report["runs_page"] = measure(base + "/runs")
        report["runs_page_filtered_sorted"] = measure(
            base + "/runs?benchmark=tau-bench&split=retail&status=completed&official=yes&q=task-01&sort=cost&order=desc")
        report["runs_page_success_filter"] = measure(base + "/runs?success=yes&model=gpt-4o-mini&sort=tokens")
        report["runs_page_deep_page"] = measure(base + "/runs?page=190&per_page=50")
        report["long_run_page_1"] = measure(f"{base}/runs/{long_id}")
        report["long_run_page_150"] = measure(f"{base}/runs/{long_id}?page=150")
        deep = max(1, args.long_steps * 4 // 5)
        report[f"long_run_replay_frame_{deep}"] = measure(f"{base}/runs/{long_id}/replay/frame/{deep}")
        report["long_run_replay_page"] = measure(f"{base}/runs/{long_id}/replay?step={deep}")
        floor = max(report["baseline_healthz"]["warm_median_ms"], 0.1)
        report["ratio_to_healthz_warm"] = {k: round(report[k]["warm_median_ms"] / floor, 1) for k in
                                           ("configurations_page", "benchmarks_page_with_plot", "benchmark_plots_page",
                                            "runs_page")}
        report["load_average_1min"] = os.getloadavg()[0]  # figures scale with the machine's load
        report["browser"] = browser_times(base)  # page usable (DOM interactive) and every figure drawn
        report["server_peak_rss_mb"] = round(peak_rss_mb(server.pid), 1)
    finally:
        server.terminate()
        server.wait(timeout=10)
    print(json.dumps(report, indent=2), flush=True)
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)  # slow on some filesystems: after the report
    ok = (report["configurations_page"]["first_ms"] < 300 and report["benchmark_plots_page"]["first_ms"] < 300
          and report["benchmarks_page_with_plot"]["first_ms"] < 300
          and report["runs_page"]["warm_median_ms"] < 300 and report["runs_page_filtered_sorted"]["warm_median_ms"] < 300
          and report["long_run_page_1"]["warm_median_ms"] < 500)
    print("targets met" if ok else "TARGETS MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
