"""One run directory as the board reads it: tolerant manifest, paged steps and events, digests.

Unlike `qitos.trace.load_run` (which loads everything and raises on a bad manifest), this
reads only what a page needs and turns every problem into a visible marker: a corrupt
manifest still shows the steps, a torn line is listed with its number, a run being written
shows its partial state. Per-step digests (small tuples) back replay totals and compare.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qitos.trace.reader import effective_status
from qitos.trace.schema import Manifest

from .tracefile import LineIndex, LineProblem, parse_line, tail_problem

RAW_MANIFEST_LIMIT = 200_000
_STEP_ID = re.compile(rb'"step_id"\s*:\s*(-?\d+|null)')


@dataclass
class ManifestView:
    data: dict[str, Any]
    model: Manifest | None
    problem: str | None
    raw: str

    @property
    def status(self) -> str:
        if self.model is not None:
            return effective_status(self.model)
        status = self.data.get("status")
        return status if isinstance(status, str) else "unknown"


def read_manifest_view(run_dir: Path) -> ManifestView:
    path = run_dir / "manifest.json"
    try:
        raw = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return ManifestView({}, None, "no manifest.json (the run is starting, or its manifest was lost)", "")
    except OSError as exc:
        return ManifestView({}, None, f"manifest.json unreadable: {exc.strerror or exc}", "")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        return ManifestView({}, None, f"corrupt manifest.json: {str(exc)[:160]}", raw[:RAW_MANIFEST_LIMIT])
    if not isinstance(data, dict):
        return ManifestView({}, None, "manifest.json is not a JSON object", raw[:RAW_MANIFEST_LIMIT])
    pretty = json.dumps(data, indent=2, ensure_ascii=False, default=str)[:RAW_MANIFEST_LIMIT]
    try:
        model = Manifest.model_validate(data)
    except ValueError as exc:
        first = str(exc).splitlines()
        detail = "; ".join(first[:3])[:300]
        return ManifestView(data, None, f"manifest.json does not match the trace schema: {detail}", pretty)
    return ManifestView(model.model_dump(mode="json"), model, None, pretty)


def is_run_dir(path: Path) -> bool:
    """A directory holding at least one of the trace files (a run, possibly still starting)."""
    return path.is_dir() and any((path / n).exists() for n in ("manifest.json", "steps.jsonl", "events.jsonl"))


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class StepDigest:
    """What replay totals and compare alignment need from one step, without its text."""

    line: int
    step_id: int
    mode: str | None
    action: str  # digest of the decision (actions + final answer)
    observation: str  # digest of the observations
    text: str  # digest of the model output text
    label: str  # short human label: tool names or "final"
    tokens: int
    cost: float | None
    latency: float
    parser_ok: bool | None
    tool_error: bool
    reasoning: str = ""  # digest of the model's reasoning (kept apart from the text)


def step_digest(line: int, rec: dict[str, Any]) -> StepDigest:
    decision = rec.get("decision") if isinstance(rec.get("decision"), dict) else {}
    actions = decision.get("actions") or []
    names = [a.get("name", "?") for a in actions if isinstance(a, dict)]
    mode = decision.get("mode")
    parser_failed = isinstance(rec.get("parser"), dict) and rec["parser"].get("ok") is False
    fallback = mode or ("unparsed" if parser_failed else "-")
    label = "final" if mode == "final" else (", ".join(names) if names else fallback)
    response = rec.get("model_response") if isinstance(rec.get("model_response"), dict) else {}
    usage = rec.get("usage") if isinstance(rec.get("usage"), dict) else {}
    parser = rec.get("parser") if isinstance(rec.get("parser"), dict) else None
    invocations = rec.get("tool_invocations") or []
    step_id = rec.get("step_id")
    return StepDigest(
        line=line, step_id=step_id if isinstance(step_id, int) else line, mode=mode if isinstance(mode, str) else None,
        action=_digest([mode, [(a.get("name"), a.get("arguments")) for a in actions if isinstance(a, dict)],
                        decision.get("final_answer")]),
        observation=_digest(rec.get("observation")), text=_digest(response.get("text")), label=label[:60],
        tokens=int(usage.get("total_tokens") or 0),
        cost=rec.get("cost") if isinstance(rec.get("cost"), (int, float)) else None,
        latency=float(rec.get("latency_seconds") or 0.0),
        parser_ok=parser.get("ok") if parser else None,
        tool_error=any(isinstance(i, dict) and i.get("status") == "error" for i in invocations),
        reasoning=_digest(response.get("reasoning")),
    )


@dataclass
class Page:
    items: list[dict[str, Any]]
    problems: list[LineProblem]
    offset: int
    total: int


@dataclass
class RunFiles:
    """Cached per run directory by the board; `refresh()` catches up with a growing trace."""

    run_dir: Path
    steps: LineIndex = field(init=False)
    events: LineIndex = field(init=False)
    _event_steps: array = field(init=False)  # step_id per event line, -1 for run-level events
    _digests: list[StepDigest] = field(init=False)
    _digest_problems: list[LineProblem] = field(init=False)
    _digested: int = field(init=False, default=0)
    _lock: threading.RLock = field(init=False, default_factory=threading.RLock)

    def __post_init__(self) -> None:
        self.steps = LineIndex(self.run_dir / "steps.jsonl")
        self.events = LineIndex(self.run_dir / "events.jsonl")
        self._event_steps = array("q")
        self._digests = []
        self._digest_problems = []

    def refresh(self) -> None:
        with self._lock:
            self._refresh()

    def _refresh(self) -> None:
        events_ino, steps_ino = self.events.ino, self.steps.ino
        self.events.update()
        self.steps.update()
        if self.events.ino != events_ino or len(self._event_steps) > self.events.count:
            self._event_steps = array("q")
        if self.steps.ino != steps_ino or self._digested > self.steps.count:
            self._digests, self._digest_problems, self._digested = [], [], 0

    def manifest(self) -> ManifestView:
        return read_manifest_view(self.run_dir)

    # -- steps -------------------------------------------------------------------------------
    def step_page(self, offset: int, limit: int) -> Page:
        problems: list[LineProblem] = []
        items = []
        for number, raw in self.steps.read_lines(offset, offset + limit):
            rec = parse_line("steps.jsonl", number, raw, problems)
            if rec is not None:
                rec["_line"] = number
                items.append(rec)
        return Page(items, problems, offset, self.steps.count)

    def digests(self) -> list[StepDigest]:
        """Digest of every complete step line (parsed once; extended as the trace grows)."""
        with self._lock:
            return list(self._extend_digests())

    def _extend_digests(self) -> list[StepDigest]:
        if self._digested < self.steps.count:
            for number, raw in self.steps.read_lines(self._digested, self.steps.count):
                rec = parse_line("steps.jsonl", number, raw, self._digest_problems)
                if rec is not None:
                    self._digests.append(step_digest(number, rec))
            self._digested = self.steps.count
        return self._digests

    def problems(self) -> list[LineProblem]:
        """Problems a reader must see: torn tails of both files (bad middle lines show per page)."""
        out = [p for p in (tail_problem(self.steps), tail_problem(self.events)) if p is not None]
        return out

    # -- events ------------------------------------------------------------------------------
    def _event_step_ids(self) -> array:
        with self._lock:
            return array("q", self._extend_event_steps())

    def _extend_event_steps(self) -> array:
        done = len(self._event_steps)
        if done < self.events.count:
            for _number, raw in self.events.read_lines(done, self.events.count):
                self._event_steps.append(_line_step_id(raw))
        return self._event_steps

    def events_for_steps(self, step_ids: set[int]) -> tuple[dict[int, list[dict[str, Any]]], list[LineProblem]]:
        ids = self._event_step_ids()
        wanted = [i for i, s in enumerate(ids) if s in step_ids]
        out: dict[int, list[dict[str, Any]]] = {}
        problems: list[LineProblem] = []
        for first, last in _ranges(wanted):
            for number, raw in self.events.read_lines(first, last + 1):
                rec = parse_line("events.jsonl", number, raw, problems)
                if rec is not None:
                    out.setdefault(ids[number - 1], []).append(rec)
        return out, problems

    def event_page(self, offset: int, limit: int) -> Page:
        problems: list[LineProblem] = []
        items = []
        for number, raw in self.events.read_lines(offset, offset + limit):
            rec = parse_line("events.jsonl", number, raw, problems)
            if rec is not None:
                items.append(rec)
        return Page(items, problems, offset, self.events.count)


def _line_step_id(raw: bytes) -> int:
    """Top-level step_id of an event line, cheaply: regex on the head, JSON only when unsure."""
    match = _STEP_ID.search(raw, 0, 400)
    payload_at = raw.find(b'"payload"', 0, 400)
    if match and (payload_at < 0 or match.start() < payload_at):
        value = match.group(1)
        return -1 if value == b"null" else int(value)
    try:
        rec = json.loads(raw)
    except ValueError:
        return -1
    step_id = rec.get("step_id") if isinstance(rec, dict) else None
    return step_id if isinstance(step_id, int) else -1


def _ranges(numbers: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for n in numbers:
        if out and n == out[-1][1] + 1:
            out[-1] = (out[-1][0], n)
        else:
            out.append((n, n))
    return out
