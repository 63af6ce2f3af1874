"""The `qita` command line: help, diff (runs and results), export, and board/replay servers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from .corpus import REPO


def qita(*args, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "qitos.cli.qita", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=timeout)


def test_help_is_fast_and_lists_commands(tmp_path):
    started = time.perf_counter()
    done = qita("--help", cwd=tmp_path)
    assert done.returncode == 0 and all(c in done.stdout for c in ("board", "replay", "export", "diff"))
    assert time.perf_counter() - started < 5


def test_diff_two_runs(corpus, tmp_path):
    a, b = corpus.logdir / corpus.runs["pair_a"], corpus.logdir / corpus.runs["pair_b"]
    report = json.loads(qita("diff", a, b, "--json", cwd=tmp_path).stdout)
    assert report["kind"] == "runs" and report["steps"] == [4, 4]
    assert report["first_divergence"] == {"position": 2, "step_id": 3, "reason": "same action (echo), different arguments"}
    keys = {(d["section"], d["key"]) for d in report["config"]}
    assert ("run_spec", "seed") in keys and ("run_spec", "stop_criteria.parse_error_limit") in keys
    assert ("run_spec", "fingerprint") not in keys
    text = qita("diff", a, b, cwd=tmp_path)
    assert text.returncode == 0 and "first divergence" in text.stdout and "step 3" in text.stdout
    assert "stop_criteria.parse_error_limit" in text.stdout
    same = json.loads(qita("diff", a, a, "--json", cwd=tmp_path).stdout)
    assert same["first_divergence"] is None and same["config"] == []
    broken = json.loads(qita("diff", corpus.logdir / corpus.runs["corrupt"], a, "--json", cwd=tmp_path).stdout)
    assert "corrupt manifest.json" in broken["problems"]["a"]


def test_diff_two_results_files(corpus, tmp_path):
    oracle, half = corpus.results
    report = json.loads(qita("diff", oracle, half, "--json", cwd=tmp_path).stdout)
    paired = report["paired"]
    assert paired["counts"] == {"both": 3, "only_a": 3, "only_b": 0, "neither": 0}
    assert paired["mcnemar_p"] == pytest.approx(0.25) and paired["test"] == "exact binomial"
    # B − A everywhere: the half oracle (B) solves half as many
    assert paired["difference"] == pytest.approx(-0.5) and paired["ci95"][0] <= -0.5 <= paired["ci95"][1] < 0
    deltas = {m["metric"]: m for m in report["metrics"]}
    assert deltas["success_rate"]["delta"] == pytest.approx(-0.5) and "pass^1" in deltas
    text = qita("diff", oracle, half, cwd=tmp_path).stdout
    assert "McNemar p = 0.2500" in text and "only A 3" in text and "success B − A = -50.0 pts" in text
    mixed = qita("diff", oracle, corpus.logdir / corpus.runs["pair_a"], cwd=tmp_path)
    assert mixed.returncode == 2 and "cannot compare" in mixed.stderr
    missing = qita("diff", tmp_path / "nope", oracle, cwd=tmp_path)
    assert missing.returncode == 2 and "neither a run directory nor a results file" in missing.stderr


def test_export_cli_writes_one_self_contained_file(corpus, tmp_path):
    out = tmp_path / "out" / "run.html"
    done = qita("export", "--run", corpus.logdir / corpus.runs["pair_a"], "--html", out, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    html = out.read_text()
    assert html.startswith("<!doctype html>") and "data:image/png;base64," in html
    assert "http://" not in html and "https://" not in html and 'src="/' not in html and 'href="/' not in html
    corrupt = qita("export", "--run", corpus.logdir / corpus.runs["corrupt"], "--html", tmp_path / "c.html", cwd=tmp_path)
    assert corrupt.returncode == 0 and "corrupt manifest.json" in (tmp_path / "c.html").read_text()
    bad = qita("export", "--run", tmp_path, "--html", tmp_path / "x.html", cwd=tmp_path)
    assert bad.returncode == 2 and "not a QitOS run directory" in bad.stderr


def _start(args: list, cwd: Path) -> tuple[subprocess.Popen, list[str]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "QITA_CACHE_DIR": str(cwd / "cache")}
    proc = subprocess.Popen([sys.executable, "-m", "qitos.cli.qita", *map(str, args)], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if line.startswith("open "):
            return proc, lines
    proc.kill()
    raise AssertionError("the board did not print its URL:\n" + "\n".join(lines))


def _get(url: str, headers: dict | None = None) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}), timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_board_off_loopback_generates_and_requires_a_token(corpus, tmp_path):
    proc, lines = _start(["board", "--logdir", corpus.logdir, "--host", "0.0.0.0", "--port", "0"], tmp_path)
    try:
        token = next(line.split(": ")[-1] for line in lines if line.startswith("access token"))
        url = lines[-1].removeprefix("open ")
        assert url.endswith(f"?token={token}")
        port = urllib.parse.urlsplit(url).port
        base = f"http://127.0.0.1:{port}/"
        assert _get(base)[0] == 401
        status, body = _get(f"{base}?token={token}")
        assert status == 200 and "Configurations" in body
        assert _get(base, {"X-Qita-Token": token})[0] == 200
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_replay_command_serves_the_replay_page(corpus, tmp_path):
    run = corpus.logdir / corpus.runs["pair_a"]
    proc, lines = _start(["replay", "--run", run, "--port", "0"], tmp_path)
    try:
        url = lines[-1].removeprefix("open ")
        assert url.startswith("http://127.0.0.1:") and url.endswith(f"/runs/{run.name}/replay")
        status, body = _get(url)
        assert status == 200 and "replay-stage" in body and "step 1 / 4" in body
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    bad = qita("replay", "--run", tmp_path, cwd=tmp_path)
    assert bad.returncode == 2 and "not a QitOS run directory" in bad.stderr
