"""A provider over files already taken out of a desktop (offline scoring, tests): VM paths map to a local
mirror folder, command outputs and native getter values come from tables. It cannot act or run setup."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .config import Command, SetupStep
from .controller import ExecuteResult
from .errors import OSWorldError, UnsupportedGetter, UnsupportedSetupStep
from .getters import GetterContext
from .tasks import GetterConfig


def command_key(command: Command) -> str:
    """Canonical text of a command, used to look up recorded outputs."""
    return command if isinstance(command, str) else shlex.join(command)


class LocalFilesProvider:
    """VM path `/home/user/x.txt` is read from `<root>/home/user/x.txt`."""

    name = "local-files"

    def __init__(
        self,
        root: Path | str,
        command_outputs: Mapping[str, str] | None = None,
        states: Mapping[str, Any] | None = None,
    ) -> None:
        self.root = Path(root).resolve()
        self.command_outputs = dict(command_outputs or {})
        self.states = dict(states or {})

    def read_file(self, path: str) -> bytes | None:
        local = (self.root / path.lstrip("/")).resolve()
        if not local.is_relative_to(self.root) or not local.is_file():
            return None
        return local.read_bytes()

    def run_command(self, command: Command, shell: bool = False) -> ExecuteResult:
        key = command_key(command)
        if key not in self.command_outputs:
            return ExecuteResult(status="error", error=f"no recorded output for command: {key}", returncode=127)
        return ExecuteResult(output=self.command_outputs[key], returncode=0)

    def supported_steps(self) -> frozenset[str]:
        return frozenset()

    def run_step(self, step: SetupStep, cache_dir: Path) -> None:
        raise UnsupportedSetupStep(f"{self.name} provider cannot run setup step '{step.type}' (files only)")

    def native_getters(self) -> frozenset[str]:
        return frozenset(self.states)

    def get_state(self, config: GetterConfig, ctx: GetterContext) -> Any:
        if config.type not in self.states:
            raise UnsupportedGetter(f"unsupported getter '{config.type}' (provider {self.name} has no value for it)")
        return self.states[config.type]

    def execute_action(self, action: Any) -> ExecuteResult | None:
        raise OSWorldError(f"{self.name} provider has no desktop to act on")

    def screenshot(self) -> bytes:
        raise OSWorldError(f"{self.name} provider has no desktop to take a screenshot of")

    def accessibility_tree(self) -> str | None:
        value = self.states.get("accessibility_tree")
        return None if value is None else str(value)
