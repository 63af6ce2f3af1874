"""Both sides (the agent side uses `ControllerProvider` for actions and observations only; setup steps and readiness
run on the scoring side): desktop providers: the `Provider` protocol, discovery from the environment, readiness of a task, and
`ControllerProvider`, which drives an OSWorld VM through its in-VM controller.

Two ways to get a VM: `QITOS_OSWORLD_CONTROLLER=http://<vm-ip>:5000` points at one that is already running
(comma-separated for several), or `--option provider=docker` lets QitOS start VMs itself (`docker_provider.py`).
Without either, every task reports `requires_unavailable` with that instruction. Chrome DevTools and VLC are
reached on the VM's host at upstream's default ports (9222, 8080) unless `QITOS_OSWORLD_PORTS` says
`chromium=<port>,vlc=<port>,vnc=<port>`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel

from qitos.benchmark.osworld.actions import Action, action_command, parse_action
from qitos.benchmark.osworld.config import NEEDS_CREDENTIALS, Command, SetupStep
from qitos.benchmark.osworld.controller import ControllerClient, ExecuteResult
from qitos.benchmark.osworld.downloads import Downloader, HttpDownloader
from qitos.benchmark.osworld.errors import UnsupportedSetupStep
from qitos.benchmark.osworld.tasks import OSWorldTask
from qitos.benchmark.osworld.upstream_env import VMAddress

ENV_CONTROLLER = "QITOS_OSWORLD_CONTROLLER"
ENV_PORTS = "QITOS_OSWORLD_PORTS"
NO_PROVIDER_REASON = (
    f"OSWorld tasks need a desktop VM; set {ENV_CONTROLLER}=http://<vm-host>:5000 to the in-VM controller "
    "of a running OSWorld VM, or run with --option provider=docker to let QitOS start one"
)


@runtime_checkable
class Provider(Protocol):
    """What the adapter needs from a desktop: setup steps, actions, observations, and (for upstream's getters)
    the controller client and the VM's address."""

    name: str
    client: ControllerClient
    address: VMAddress

    def supported_steps(self) -> frozenset[str]: ...

    def run_step(self, step: SetupStep, cache_dir: Path) -> None: ...

    def execute_action(self, action: Any) -> ExecuteResult | None: ...

    def screenshot(self) -> bytes: ...

    def accessibility_tree(self) -> str | None: ...


def discover_provider(env: Mapping[str, str] | None = None, downloader: Downloader | None = None) -> Provider | None:
    """A ControllerProvider when `QITOS_OSWORLD_CONTROLLER` is set, else None (nothing is contacted yet)."""
    env = env if env is not None else os.environ
    url = env.get(ENV_CONTROLLER, "").strip()
    if not url:
        return None
    address = VMAddress.from_controller_url(url, **parse_ports(env.get(ENV_PORTS, "")))
    return ControllerProvider(ControllerClient(url), downloader=downloader, address=address)


def parse_ports(text: str) -> dict[str, int]:
    """`chromium=9222,vlc=8080,vnc=8006` -> VMAddress keyword arguments; a bad entry is a ValueError naming it."""
    names = {"chromium": "chromium_port", "vlc": "vlc_port", "vnc": "vnc_port"}
    ports: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        key, _, value = item.partition("=")
        if key.strip() not in names or not value.strip().isdigit():
            raise ValueError(f"{ENV_PORTS}: bad entry '{item}'; expected chromium=<port>,vlc=<port>,vnc=<port>")
        ports[names[key.strip()]] = int(value)
    return ports


def run_setup(task: OSWorldTask, provider: Provider, cache_dir: Path) -> None:
    """Run the task's setup steps in order; controller or download failures propagate (setup_failed)."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    for step in task.config:
        provider.run_step(step, cache_dir)


class Readiness(BaseModel):
    """Whether a task can run here; `reason` says what is missing."""

    status: Literal["ready", "requires_unavailable", "unsupported"]
    reason: str | None = None


def readiness(task: OSWorldTask, provider: Provider | None) -> Readiness:
    """`requires_unavailable` when the environment lacks something (no provider, credentials); `unsupported`
    when the provider cannot run a setup step; else `ready`. (Whether the evaluators can score the task is
    `evaluator.resolve`.)"""
    if provider is None:
        return Readiness(status="requires_unavailable", reason=NO_PROVIDER_REASON)
    steps = list(task.config) + list(task.evaluator.postconfig)
    credential_steps = sorted({s.type for s in steps if s.type in NEEDS_CREDENTIALS})
    if credential_steps:
        return Readiness(status="requires_unavailable",
                         reason=f"setup step(s) {credential_steps} need Google account credentials, which QitOS does not ship")
    missing_steps = sorted({s.type for s in steps} - provider.supported_steps())
    if missing_steps:
        return Readiness(status="unsupported", reason=f"provider {provider.name} cannot run setup step(s) {missing_steps}")
    return Readiness(status="ready")


def requires_unavailable(task: OSWorldTask, provider: Provider | None) -> str | None:
    """The reason a task cannot run in this environment, or None."""
    ready = readiness(task, provider)
    return ready.reason if ready.status == "requires_unavailable" else None


_STEPS = frozenset({
    "download", "launch", "execute", "command", "execute_with_verification", "open", "activate_window",
    "close_window", "chrome_open_tabs", "sleep", "change_wallpaper",
})


class ControllerProvider:
    """A running OSWorld VM reached through its controller; setup inputs are downloaded on the host and
    uploaded, as upstream does, so the VM needs no credentials or proxy of its own."""

    name = "controller"

    def __init__(
        self,
        client: ControllerClient,
        downloader: Downloader | None = None,
        sleep: Callable[[float], None] = time.sleep,
        python: str = "python",
        address: VMAddress | None = None,
    ) -> None:
        self.client = client
        self.address = address or VMAddress.from_controller_url(client.base_url)
        self.downloader = downloader or HttpDownloader()
        self._sleep = sleep
        self._python = python

    def check(self) -> str:
        """Contact the controller once; returns its platform or raises ControllerUnreachable."""
        return self.client.platform()

    def read_file(self, path: str) -> bytes | None:
        return self.client.get_file(path)

    def run_command(self, command: Command, shell: bool = False) -> ExecuteResult:
        return self.client.execute(command, shell=shell)

    def supported_steps(self) -> frozenset[str]:
        return _STEPS

    def run_step(self, step: SetupStep, cache_dir: Path) -> None:
        p: Any = step.parameters
        if step.type == "download":
            for item in p.files:
                local = self.downloader.fetch(item.url, cache_dir / "downloads" / Path(item.path).name)
                self.client.upload_file(item.path, local.read_bytes())
        elif step.type == "launch":
            self.client.launch(p.command, shell=p.shell)
        elif step.type in ("execute", "command"):
            result = self.client.setup_execute(p.command, shell=p.shell)
            for name, text in ((p.stdout, result.output), (p.stderr, result.error)):
                if name:
                    (cache_dir / name).parent.mkdir(parents=True, exist_ok=True)
                    (cache_dir / name).write_text(text or "", encoding="utf-8")
        elif step.type == "execute_with_verification":
            self._execute_until(p)
        elif step.type == "open":
            self.client.open_file(p.path)
        elif step.type == "activate_window":
            self.client.activate_window(p.window_name, strict=p.strict, by_class=p.by_class)
        elif step.type == "close_window":
            self.client.close_window(p.window_name, strict=p.strict, by_class=p.by_class)
        elif step.type == "chrome_open_tabs":
            from qitos.benchmark.osworld.chrome_setup import open_tabs

            open_tabs(self.address, list(p.urls_to_open), sleep=self._sleep)
        elif step.type == "sleep":
            self._sleep(p.seconds)
        elif step.type == "change_wallpaper":
            self.client.change_wallpaper(p.path)
        else:
            raise UnsupportedSetupStep(f"provider {self.name} cannot run setup step '{step.type}'")

    def _execute_until(self, p: Any) -> None:
        """Run the command, then re-run it until its output contains `expected_output` (or time runs out)."""
        deadline = time.monotonic() + p.max_wait_time
        while True:
            result = self.client.setup_execute(p.command, shell=p.shell)
            if p.expected_output is None or p.expected_output in (result.output or ""):
                return
            if time.monotonic() >= deadline:
                raise UnsupportedSetupStep(f"execute_with_verification: output never contained {p.expected_output!r}")
            self._sleep(p.check_interval)

    def execute_action(self, action: Action | dict[str, Any]) -> ExecuteResult | None:
        """Run one agent action; WAIT sleeps a second, FAIL/DONE run nothing (the episode ends)."""
        parsed = parse_action(action)
        if isinstance(parsed, str) and parsed.strip() == "WAIT":
            self._sleep(1.0)
            return None
        command = action_command(parsed, python=self._python)
        return None if command is None else self.client.execute(command)

    def screenshot(self) -> bytes:
        return self.client.screenshot()

    def accessibility_tree(self) -> str | None:
        return self.client.accessibility_tree()

    def close(self) -> None:
        self.client.close()


__all__ = [
    "ENV_CONTROLLER", "ControllerProvider", "Provider", "Readiness", "discover_provider",
    "readiness", "requires_unavailable", "run_setup",
]
