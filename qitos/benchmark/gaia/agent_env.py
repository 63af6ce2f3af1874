"""Agent side: GAIA's tools in the agent process, bound to its private work dir.

The question's attachment arrives as bytes in the work dir (never the dataset folder, whose
metadata holds every answer); `run_python` runs in a bubblewrap sandbox over the work dir, and the
web tools reach the web from here. The answer is scored on the scoring side (`adapter.evaluate`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qitos.benchmark.base import TaskRuntime
from qitos.benchmark.gaia.runtime import PYTHON_TIMEOUT_SECONDS, close_runtime, tools_runtime
from qitos.benchmark.gaia.web import WebConfig

class _Closer:
    """Closes the tools' sandbox and HTTP client when the Engine closes the environment."""

    def __init__(self, runtime: TaskRuntime) -> None:
        self.runtime = runtime

    def close(self) -> None:
        close_runtime(self.runtime)


def build(workdir: Path, link: Any, attachments: list[str], web: dict[str, Any] | None = None,
          python_timeout_seconds: int = PYTHON_TIMEOUT_SECONDS) -> TaskRuntime:
    config = WebConfig.model_validate(web) if web else None
    runtime = tools_runtime([workdir / name for name in attachments], workdir, config,
                            python_timeout_seconds=python_timeout_seconds)
    runtime.env = _Closer(runtime)
    return runtime
