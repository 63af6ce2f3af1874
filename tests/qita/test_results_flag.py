"""`qita board --results a.jsonl b.jsonl`, as the README writes it, opens both files on the Experiment page."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request

from .corpus import REPO


def test_board_takes_several_results_files_after_one_flag(corpus, tmp_path):
    oracle, half = corpus.results
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "qitos.cli.qita", "board", "--logdir", str(corpus.logdir),
                             "--results", str(oracle), str(half), "--port", "0", "--cache-dir", str(tmp_path / "c")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        url, lines, deadline = None, [], time.monotonic() + 60
        while time.monotonic() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("open "):
                url = line.removeprefix("open ").strip()
        assert url, "".join(lines)
        with urllib.request.urlopen(url.rstrip("/") + "/experiment", timeout=10) as response:
            body = response.read().decode()
        assert oracle.name in body and half.name in body
    finally:
        proc.terminate()
        proc.wait(timeout=10)
