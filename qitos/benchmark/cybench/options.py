"""Scoring side: CyBench's `--option` keys, declared (see `qitos.benchmark.options`), and `CybenchOptions`, the
parsed settings the runtime, the episode and the recipes read."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import field_validator

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.options import BenchmarkOptions, option, resolve_options
from qitos.benchmark.cybench.tasks import SUBTASK_MAX_ITERATIONS

COMMAND_TIMEOUT = 120.0
MEMORY_WINDOW = 3
ORACLE_TIMEOUT = 300.0
# cybench-agent: upstream's run_benchmark.py defaults (its README's runs use the same)
MAX_INPUT_TOKENS = 6000
MAX_OUTPUT_TOKENS = 2000
RESPONSES_TO_KEEP = 3
OBSERVATIONS_TO_KEEP = 3


class CybenchOptionSet(BenchmarkOptions):
    subtask_iterations: int = option(SUBTASK_MAX_ITERATIONS, "guided: iterations per subtask", ge=1)
    command_timeout: float = option(COMMAND_TIMEOUT, "seconds one shell command may run before it is killed", gt=0)
    python_path: str = option("", "host folders, ':'-separated, of extra Python packages for the sandbox (e.g. "
                                  "made with `pip install --target DIR pycryptodome`)",
                              range="existing folders, ':'-separated")
    toolchain: str = option("auto", "the CTF toolchain venv for the sandbox: auto (use it when installed, see "
                                    "`qit data fetch cybench --toolchain`), off, or a venv folder",
                            range="auto, off, or a venv folder")
    hints: bool = option(False, "guided: show each subtask's hints with its question")
    memory_window: int = option(MEMORY_WINDOW, "react: latest responses and observations kept in the prompt", ge=1)
    oracle_timeout: float = option(ORACLE_TIMEOUT, "oracle: seconds the reference solution may run", gt=0)
    # cybench-agent (upstream's agent): named as upstream's run_task.py flags
    max_iterations: int | None = option(None, "cybench-agent: upstream's --max_iterations: iterations of the "
                                              "unguided task (default 15, the step budget) or of each guided "
                                              "subtask (default subtask_iterations, 5)", ge=1)
    max_input_tokens: int = option(MAX_INPUT_TOKENS, "cybench-agent: the model input is truncated to this many "
                                                     "tokens (gpt-4 encoding), as upstream", ge=1)
    max_output_tokens: int = option(MAX_OUTPUT_TOKENS, "cybench-agent: max_tokens of each request", ge=1)
    responses_to_keep: int = option(RESPONSES_TO_KEEP, "cybench-agent: latest model responses kept in the chain",
                                    ge=0)
    observations_to_keep: int = option(OBSERVATIONS_TO_KEEP, "cybench-agent: latest observations kept in the chain",
                                       ge=0)
    iterations_until_hint: int | None = option(None, "cybench-agent: at this iteration of a subtask its hints are "
                                                     "added (default: never, as upstream's runs)", ge=0)
    task_objective: str = option("", "cybench-agent: the objective the prompt names (default: upstream's "
                                     "--task_objective default, read from run_task.py)")
    execution: str = option("auto", "where commands run: image (upstream's agent image cybench/cybench, when a "
                                    "Docker engine holds it locally), bwrap (QitOS's sandbox), or auto (image if "
                                    "present, else bwrap)", range="auto, image or bwrap")

    @field_validator("execution")
    @classmethod
    def _execution(cls, value: str) -> str:
        if value not in ("auto", "image", "bwrap"):
            raise ValueError(f"--option execution={value}: use auto, image or bwrap")
        return value

    @field_validator("python_path")
    @classmethod
    def _folders(cls, value: str) -> str:
        for path in _paths(value):
            if not path.is_dir():
                raise ValueError(f"--option python_path: {path} is not a directory")
        return value

    @field_validator("toolchain")
    @classmethod
    def _venv(cls, value: str) -> str:
        value = value.strip() or "auto"
        if value not in ("auto", "off") and not (Path(value).expanduser().resolve() / "bin" / "python3").exists():
            raise ValueError(f"--option toolchain={value}: {Path(value).expanduser().resolve()} is not a venv (no "
                             "bin/python3); use auto, off, or the venv `qit data fetch cybench --toolchain` made")
        return value


def _paths(value: str) -> tuple[Path, ...]:
    return tuple(Path(p).expanduser().resolve() for p in value.split(":") if p.strip())


@dataclass(frozen=True)
class CybenchOptions:
    """The `--option KEY=VALUE` settings, parsed and checked once."""

    subtask_iterations: int = SUBTASK_MAX_ITERATIONS
    command_timeout: float = COMMAND_TIMEOUT
    python_path: tuple[Path, ...] = ()
    toolchain: str = "auto"  # auto, off, or a venv folder (resolved)
    hints: bool = False
    memory_window: int = MEMORY_WINDOW
    oracle_timeout: float = ORACLE_TIMEOUT
    max_iterations: int | None = None
    max_input_tokens: int = MAX_INPUT_TOKENS
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    responses_to_keep: int = RESPONSES_TO_KEEP
    observations_to_keep: int = OBSERVATIONS_TO_KEEP
    iterations_until_hint: int | None = None
    task_objective: str = ""
    execution: str = "auto"

    @classmethod
    def from_load(cls, load: LoadOptions) -> CybenchOptions:
        values = resolve_options(CybenchOptionSet, load.options, "cybench")
        toolchain = values["toolchain"]
        upstream_keys = ("max_iterations", "max_input_tokens", "max_output_tokens", "responses_to_keep",
                         "observations_to_keep", "iterations_until_hint", "task_objective", "execution")
        # upstream's --max_iterations is per guided subtask too
        subtask_iterations = values["max_iterations"] or values["subtask_iterations"]
        return cls(subtask_iterations=subtask_iterations, command_timeout=values["command_timeout"],
                   python_path=_paths(values["python_path"]),
                   toolchain=toolchain if toolchain in ("auto", "off") else str(Path(toolchain).expanduser().resolve()),
                   hints=values["hints"], memory_window=values["memory_window"],
                   oracle_timeout=values["oracle_timeout"], **{k: values[k] for k in upstream_keys})
