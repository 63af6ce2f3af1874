"""What one agent task may use: streamed assets, memory, processes, file size and CPU time.

Set with `qit bench run` flags (`--asset-max-file`, `--asset-max-run`, `--agent-memory`, `--agent-max-processes`,
`--agent-file-size`, `--agent-cpu-seconds`), recorded in the RunSpec (`environment.agent_limits`), enforced by
the scoring side (`receiver.py` for assets, `watch.py` for the agent's processes). Reaching one ends the task
with the stop reason that names it; the limit is the agent's to respect, so the task counts as a failure.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from qitos.sandbox.limits import human, parse_size

MIB, GIB = 1 << 20, 1 << 30

# stop reason per limit (qitos.core.stop.StopReason values)
STOP_REASONS = {"assets": "asset_quota", "memory": "memory_limit", "processes": "process_limit",
                "file_size": "file_size_limit", "cpu_time": "cpu_time_limit"}


class AgentLimits(BaseModel):
    """Per task; `None` nowhere: every limit has a value, and the RunSpec records it."""

    asset_file_bytes: int = Field(default=16 * MIB, ge=1024)  # one streamed asset (a screenshot)
    asset_run_bytes: int = Field(default=512 * MIB, ge=1024)  # all assets of one task's trace
    memory_bytes: int = Field(default=4 * GIB, ge=64 * MIB)  # the task's processes together
    max_processes: int = Field(default=256, ge=8)  # the task's processes and threads at once
    file_size_bytes: int = Field(default=1 * GIB, ge=MIB)  # one file the agent writes
    cpu_seconds: int = Field(default=3600, ge=1)  # CPU time of the task's processes together

    def record(self) -> dict[str, Any]:
        return self.model_dump()

    def describe(self, name: str) -> str:
        return {"memory": f"more than {human(self.memory_bytes)} of memory",
                "processes": f"more than {self.max_processes} processes at once",
                "file_size": f"a file of {human(self.file_size_bytes)}, the largest allowed",
                "cpu_time": f"more than {self.cpu_seconds} s of CPU time"}[name]


def parse_limits(**flags: str | int | None) -> AgentLimits:
    """The flags as given (sizes like 512M, counts and seconds as whole numbers); a bad one is a one-line error."""
    sizes = {"asset_max_file": "asset_file_bytes", "asset_max_run": "asset_run_bytes", "agent_memory": "memory_bytes",
             "agent_file_size": "file_size_bytes"}
    counts = {"agent_max_processes": "max_processes", "agent_cpu_seconds": "cpu_seconds"}
    values: dict[str, int] = {}
    for flag, value in flags.items():
        if value is None:
            continue
        option = "--" + flag.replace("_", "-")
        if flag in sizes:
            values[sizes[flag]] = parse_size(str(value), option)
        elif flag in counts:
            if not str(value).isdigit():
                raise ValueError(f"{option} {value}: give a whole number, e.g. 256")
            values[counts[flag]] = int(value)
        else:
            raise ValueError(f"unknown limit {option}")
    try:
        return AgentLimits(**values)
    except ValueError as exc:
        field = next((f for f in values if f in str(exc)), "")
        flag = next((k for k, v in {**sizes, **counts}.items() if v == field), field)
        low = AgentLimits.model_fields[field].metadata[0].ge if field else None
        raise ValueError(f"--{flag.replace('_', '-')}: at least {human(low) if 'bytes' in field else low}") from None
