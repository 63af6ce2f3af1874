"""A real `qita board` process for tests that read its pages over HTTP on loopback."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

REPO = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def board(*args: str, cwd: Path) -> Iterator[str]:
    """Start `qita board <args> --port 0`, yield its URL once it prints it, stop it afterwards."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "qitos.cli.qita", "board", *args, "--port", "0"], cwd=cwd, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
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
        yield url.rstrip("/")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def page(url: str, timeout: float = 30) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return response.read().decode()
