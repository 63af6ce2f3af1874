"""A headless Debian Chromium with DevTools on a loopback port: the "VM's Chrome" for tests of upstream's Chrome
setup steps and getters (Playwright `connect_over_cdp`)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from tests.conftest import require_system


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def chromium(workdir: Path, start_url: str = "about:blank") -> Iterator[int]:
    """Run Chromium (one start tab: headless mode takes one URL) until the block ends; yields the DevTools port."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    require_system(browser is not None, "Chromium (apt-get install chromium)")
    port = free_port()
    log = workdir / "chromium.log"
    proc = subprocess.Popen([browser, "--headless=new", "--no-sandbox", f"--remote-debugging-port={port}",
                             f"--user-data-dir={workdir / 'chromium-profile'}", "--no-first-run", start_url],
                            stdout=subprocess.DEVNULL, stderr=log.open("w"))
    try:
        deadline = time.monotonic() + 90
        while True:  # DevTools answers /json/version once the browser is up
            try:
                if httpx.get(f"http://127.0.0.1:{port}/json/version", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and proc.poll() is None, log.read_text()[-2000:]
            time.sleep(0.3)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
