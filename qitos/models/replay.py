"""Replay model: serves the model responses recorded in a trace, in order, for deterministic re-execution."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qitos.trace.reader import TraceReadError, read_manifest, read_steps

from qitos.models.base import EventSink, ModelConfigError, ModelError, ModelResponse


class ReplayModel:
    family = "replay"
    provider = "qitos"

    def __init__(self, run_dir: Path | str) -> None:
        run_dir = Path(run_dir)
        try:
            manifest = read_manifest(run_dir)
        except TraceReadError as exc:
            raise ModelConfigError(f"replay model: {exc}") from None
        self.run_dir = run_dir
        self.name = f"replay:{manifest.run_id}"
        self.recorded_model = manifest.model_id
        self.params: dict[str, Any] = dict((manifest.run_spec or {}).get("generation", {}))
        self.responses = [ModelResponse.model_validate(s.model_response) for s in read_steps(run_dir) if s.model_response]
        self.position = 0

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None, *,
                 on_event: EventSink | None = None, **params: Any) -> ModelResponse:
        if self.position >= len(self.responses):
            raise ModelError(f"replay of {self.run_dir} has no more recorded responses (it had {len(self.responses)})")
        response = self.responses[self.position]
        self.position += 1
        return response.model_copy(deep=True)
