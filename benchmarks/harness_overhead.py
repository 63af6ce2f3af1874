"""Harness overhead: the same tool-calling workload through QitOS and through Inspect AI, in one invocation.

Workload: N samples, each a model call that asks for a tool, the tool, and a model call with the final
answer, served by a local OpenAI-compatible HTTP server (its own process) with a configurable latency.
Inspect AI is installed by this script into its own venv (benchmarks/.venv-inspect) on first use.

Prints wall-clock seconds and ratios:
- zero latency: per-sample overhead of each harness (wall / N); target QitOS <= 0.5 × Inspect.
- 200 ms latency, N=512, concurrency 64: QitOS wall vs the ideal ceil(N/64) × 2 × 200 ms; target <= 1.15 ×.

Run: .venv/bin/python benchmarks/harness_overhead.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
INSPECT_VENV = HERE / ".venv-inspect"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_inspect() -> Path | None:
    python = INSPECT_VENV / "bin" / "python"
    if not python.exists():
        print("installing inspect-ai into benchmarks/.venv-inspect (first run only)...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(INSPECT_VENV)], check=True)
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", "inspect-ai", "openai"], capture_output=True, text=True)
        if done.returncode != 0:
            print(f"could not install inspect-ai: {done.stderr[-500:]}")
            return None
    return python


class Server:
    def __init__(self, latency: float) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.openai_server", "--port", str(self.port),
                                      "--latency", str(latency)], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 20
        while time.time() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("workload server did not start")

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def drive(python: Path, script: str, base_url: str, samples: int, concurrency: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENAI_API_KEY": "not-needed"}
    done = subprocess.run([str(python), str(HERE / "harness_drivers" / script), "--base-url", base_url, "--samples",
                           str(samples), "--concurrency", str(concurrency)], capture_output=True, text=True, env=env, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{script} failed: {done.stderr[-1500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def scenario(latency: float, samples: int, concurrency: int, inspect_python: Path | None) -> dict:
    server = Server(latency)
    try:
        out = {"qitos": drive(Path(sys.executable), "qitos_driver.py", server.base_url, samples, concurrency)}
        if inspect_python is not None:
            out["inspect"] = drive(inspect_python, "inspect_driver.py", server.base_url, samples, concurrency)
    finally:
        server.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller N for a fast look")
    parser.add_argument("--no-inspect", action="store_true")
    args = parser.parse_args()
    inspect_python = None if args.no_inspect else ensure_inspect()
    n0 = 64 if args.quick else 256
    print(f"== zero latency, N={n0}, concurrency 16")
    zero = scenario(0.0, n0, 16, inspect_python)
    q = zero["qitos"]["seconds"] / n0 * 1000
    print(f"QitOS   : {zero['qitos']['seconds']:.2f} s wall, {q:.2f} ms per sample, {zero['qitos']['successes']}/{n0} correct")
    if "inspect" in zero:
        i = zero["inspect"]["seconds"] / n0 * 1000
        print(f"Inspect : {zero['inspect']['seconds']:.2f} s wall, {i:.2f} ms per sample, "
              f"{zero['inspect']['successes']}/{n0} correct")
        print(f"ratio QitOS/Inspect per-sample overhead: {q / i:.2f} (target <= 0.5)")
    n1, c1, lat = (128, 64, 0.2) if args.quick else (512, 64, 0.2)
    ideal = math.ceil(n1 / c1) * 2 * lat
    print(f"== {lat * 1000:.0f} ms latency, N={n1}, concurrency {c1}; ideal {ideal:.2f} s")
    slow = scenario(lat, n1, c1, inspect_python)
    print(f"QitOS   : {slow['qitos']['seconds']:.2f} s wall = {slow['qitos']['seconds'] / ideal:.3f} × ideal (target <= 1.15)")
    if "inspect" in slow:
        print(f"Inspect : {slow['inspect']['seconds']:.2f} s wall = {slow['inspect']['seconds'] / ideal:.3f} × ideal")


if __name__ == "__main__":
    main()
