"""A real multi-node Ray cluster on one machine: a head and worker nodes, each started by `ray start`.

Every node listens on loopback only (`--node-ip-address 127.0.0.1`) with ports of its own, runs in its own
process group (so one node can be killed alone, as a machine dies) and shares the head's temp dir. Nothing
here calls `ray stop`, which would stop every Ray instance of this user on the machine: each node's process
group is killed instead. The GCS is told to notice a dead node within a few seconds.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.openai_server import free_port

REPO = Path(__file__).resolve().parents[2]
RAY_ENV = {"RAY_ENABLE_UV_RUN_RUNTIME_ENV": "0", "RAY_USAGE_STATS_ENABLED": "0"}
# a node whose raylet is gone is declared dead after about 5 missed health checks, 1 s apart (default: about 30 s);
# each check may take 3 s, so a node slow under load is not taken for dead
FAST_DEATH = {"RAY_health_check_initial_delay_ms": "5000", "RAY_health_check_period_ms": "1000",
              "RAY_health_check_timeout_ms": "3000", "RAY_health_check_failure_threshold": "5"}


def ray_cli() -> str:
    exe = Path(sys.executable).parent / "ray"
    return str(exe) if exe.exists() else shutil.which("ray") or "ray"


def _listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@dataclass
class RayNodes:
    """The cluster: `address` for `--ray-address`, node ids by name, and `kill(name)` to take a node down."""

    logs: Path
    port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    ids: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        import secrets

        self.temp = Path("/tmp") / f"qitos-ray-{os.getpid()}-{self.port}"  # Ray's socket paths must stay short
        self.address = f"127.0.0.1:{self.port}"
        self.taken = {self.port}  # every port handed to a node of this cluster (see `_ports`)
        # Ray's token authentication, as a real cluster has it: every node and driver holds the cluster's token
        self.auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a node or driver of this cluster (`qit` included)."""
        return {**os.environ, **RAY_ENV, **self.auth, "PYTHONPATH": str(REPO), **(extra or {})}

    def _ports(self) -> list[str]:
        """Ports of one node, each used once in the cluster: Ray refuses a port given to two components, and two
        `free_port()` calls can return the same port (the first was closed before the second asked)."""
        taken = self.taken
        low = free_port()
        while any(p in taken for p in range(low, low + 41)):
            low = free_port()
        taken.update(range(low, low + 41))

        def outside() -> int:  # a free port nobody else in the cluster was given
            port = free_port()
            while port in taken:
                port = free_port()
            taken.add(port)
            return port

        return [f"--node-manager-port={outside()}", f"--object-manager-port={outside()}",
                f"--min-worker-port={low}", f"--max-worker-port={low + 40}",
                f"--dashboard-agent-listen-port={outside()}", f"--dashboard-agent-grpc-port={outside()}",
                f"--metrics-export-port={outside()}", f"--runtime-env-agent-port={outside()}"]

    def _start(self, name: str, args: list[str], env: dict[str, str]) -> None:
        log = open(self.logs / f"ray-{name}.log", "w")
        self.procs[name] = subprocess.Popen([ray_cli(), "start", "--block", "--node-ip-address=127.0.0.1",
                                             "--disable-usage-stats", *args],
                                            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def start_head(self, cpus: int = 1, resources: dict[str, float] | None = None) -> None:
        extra = [f"--resources={json.dumps(resources)}"] if resources else []
        self._start("head", ["--head", f"--port={self.port}", f"--num-cpus={cpus}", "--include-dashboard=false",
                             f"--temp-dir={self.temp}", *extra, *self._ports()], self.env(FAST_DEATH))
        deadline = time.monotonic() + 120
        while not _listening(self.port):
            if self.procs["head"].poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"ray start --head failed: {(self.logs / 'ray-head.log').read_text()[-2000:]}")
            time.sleep(0.5)

    def start_worker(self, name: str, resources: dict[str, float], cpus: int = 1,
                     env: dict[str, str] | None = None) -> None:
        """A worker node advertising `resources` plus `node_<name>` (how the tests find its node id)."""
        tagged = {**resources, f"node_{name}": 1}
        self._start(name, [f"--address={self.address}", f"--num-cpus={cpus}", f"--resources={json.dumps(tagged)}",
                           *self._ports()], self.env(env))

    def wait_for(self, names: list[str], timeout: float = 120) -> None:
        """Until each named worker node is alive in the cluster; records its node id."""
        deadline = time.monotonic() + timeout
        while True:
            for node in self.nodes():
                for name in names:
                    if node["Alive"] and f"node_{name}" in node["Resources"]:
                        self.ids[name] = node["NodeID"]
            if all(name in self.ids for name in names):
                return
            for name in names:
                if self.procs[name].poll() is not None:
                    raise AssertionError(f"ray start ({name}) exited: "
                                         f"{(self.logs / f'ray-{name}.log').read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"nodes {names} did not join within {timeout:.0f}s")
            time.sleep(1)

    def nodes(self) -> list[dict]:
        """`ray.nodes()` as a separate driver sees it (this test process never becomes a Ray driver)."""
        code = ("import json, ray; ray.init(address=%r, log_to_driver=False); "
                "print(json.dumps([{k: n[k] for k in ('NodeID', 'Alive', 'Resources')} for n in ray.nodes()]))"
                % self.address)
        done = subprocess.run([sys.executable, "-c", code], env=self.env(), capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """The node dies as a machine does: its raylet, object store and workers at once."""
        proc = self.procs.pop(name)
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def stop(self) -> None:
        for name in [n for n in self.procs if n != "head"] + (["head"] if "head" in self.procs else []):
            proc = self.procs.pop(name)
            for sig, grace in ((signal.SIGTERM, 15), (signal.SIGKILL, 10)):  # `ray start --block` may linger on TERM
                try:
                    os.killpg(proc.pid, sig)
                    proc.wait(timeout=grace)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # whatever of the group outlived its leader
            except ProcessLookupError:
                pass
        shutil.rmtree(self.temp, ignore_errors=True)
