"""The manifest's JSON text, with its large fields encoded once per value instead of on every rewrite.

A run's manifest is rewritten when it starts, after each step (or batch of the agent side's stream) and when it
ends, four or five times for a short task. Most of its text is the RunSpec, the experiment, the official checks,
the tool manifest and the task: set once or twice a run, yet encoded and scrubbed again on every rewrite (measured:
their encoding was over half of a rewrite's 80-220 us). `ManifestEncoder` keeps each one's scrubbed JSON until the
field holds another object or the redactor learns another secret. Fields are assigned whole, never changed in place
(`TraceWriter.update` and `finalize` assign validated values), so an object that is still there has not changed.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from qitos.trace.redact import Redactor
from qitos.trace.schema import Manifest

KEPT_FIELDS = ("run_spec", "experiment_spec", "official_checks", "tool_manifest", "task")
_ENCODERS = {name: TypeAdapter(Manifest.model_fields[name].annotation) for name in KEPT_FIELDS}
_REST = set(Manifest.model_fields) - set(KEPT_FIELDS)


class ManifestEncoder:
    """One per TraceWriter: `encode(manifest)` is `redactor.scrub_text(manifest.model_dump_json())` as a JSON
    document (the kept fields come last)."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self._kept: dict[str, tuple[Any, int, str]] = {}  # field -> (the value encoded, redactor version, text)

    def encode(self, manifest: Manifest) -> str:
        scrub = self.redactor.scrub_text
        version = self.redactor.version
        parts = [scrub(manifest.model_dump_json(include=_REST)[:-1])]  # the rest, without its closing brace
        for name in KEPT_FIELDS:
            value = getattr(manifest, name)
            kept = self._kept.get(name)
            if kept is None or kept[0] is not value or kept[1] != version:
                text = scrub(_ENCODERS[name].dump_json(value).decode("utf-8"))
                kept = self._kept[name] = (value, version, text)
            parts.append(f',"{name}":{kept[2]}')
        parts.append("}")
        return "".join(parts)
