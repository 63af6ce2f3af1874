"""Configurations: what the runs list shows first, and what plots compare.

A configuration is one results file and one RunSpec fingerprint (`run_spec_ref`) within it,
split further by benchmark, split, subset, model and recipe (all that tells apart rows without
a fingerprint): the rows `qit bench eval` would aggregate together. Traces in the logdir that
no results file names form configurations of their own, keyed by the fingerprint their
manifest records. Metrics come from
`qitos.benchmark.metrics.summarize`, so the board and `qit bench eval` report the same numbers.

Everything here is computed once per index version and results-file state (`ConfigCatalog`),
so the grouped list and the plots cost a dictionary lookup on warm loads.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from qitos.benchmark.metrics import group_rows, summarize

from .index import RunIndex

NO_BENCHMARK = "(none)"  # the group key of runs made outside a benchmark (e.g. `qit demo`, own scripts)

# as `qit bench eval` groups; the first four are Configuration fields (`_finish` labels model and recipe)
CONFIG_KEYS = ("benchmark", "split", "subset", "run_spec_ref", "model", "recipe")


def config_id(source: str, key: tuple[Any, ...]) -> str:
    raw = "\0".join([source, *(str(k) if k is not None else "" for k in key)])
    return hashlib.sha256(raw.encode()).hexdigest()[:12]


def _label(values: set[Any]) -> str | None:
    present = sorted(str(v) for v in values if v not in (None, ""))
    return ", ".join(present) if present else None


@dataclass
class Configuration:
    id: str
    source: Path | None  # the results file, or None for traces no results file names
    benchmark: str | None
    split: str | None
    subset: str | None
    run_spec_ref: str | None
    rows: list[dict[str, Any]]
    run_names: list[str | None]  # trace directory name of each row (None when it has no trace)
    recipe: str | None = None
    model: str | None = None
    official: str = "no"  # "yes" (every trace official) | "no" | "mixed"
    read_gold: bool = False  # a trace failed the agent_unaided check
    metrics: dict[str, Any] = field(default_factory=dict)
    display: str = ""  # `name`, made unique within its benchmark by the catalog

    @property
    def source_label(self) -> str:
        return self.source.name if self.source else "traces only"

    @property
    def trials(self) -> int:
        """Trials requested (what `summarize` counts with), else the most a row shows."""
        if isinstance(self.metrics.get("trials_requested"), int):
            return self.metrics["trials_requested"]
        return max((int(r.get("trial") or 0) for r in self.rows), default=-1) + 1

    @property
    def tasks(self) -> int:
        """Tasks selected (the denominator's task count), else the tasks with a row."""
        if isinstance(self.metrics.get("selected_tasks"), int):
            return self.metrics["selected_tasks"]
        return int(self.metrics.get("tasks") or 0)

    @property
    def base_name(self) -> str:
        return " · ".join(part for part in (self.recipe, self.model or "no model") if part)

    @property
    def name(self) -> str:
        """A short human name: what a reader needs to tell configurations of one benchmark apart."""
        return self.display or self.base_name

    @property
    def success_rate(self) -> float | None:
        return self.metrics.get("success_rate")

    @property
    def coverage(self) -> float | None:
        """Scored rows over selected task × trials (the lead's `coverage`; derived when absent)."""
        if "coverage" in self.metrics:
            return self.metrics["coverage"]
        total = self.metrics.get("total") or 0
        return (self.metrics.get("scored") or 0) / total if total else None

    @property
    def pass_k(self) -> tuple[int, float | None] | None:
        values = self.metrics.get("pass_hat_k") or {}
        if not values:
            return None
        k = max(int(k) for k in values)
        return k, values[str(k)]

    @property
    def total_latency(self) -> float:
        return sum(float(r.get("latency_seconds") or 0.0) for r in self.rows)

    @property
    def mean_cost(self) -> float | None:
        cost = self.metrics.get("total_cost")
        n = self.metrics.get("total") or 0
        return cost / n if cost is not None and n else None

    @property
    def is_oracle(self) -> bool:
        """A validator that reads gold: its traces say so (agent_unaided failed), or its recipe is an oracle."""
        return self.read_gold or "oracle" in (self.recipe or "")


def _index_row(r: Any) -> dict[str, Any]:
    """A results-like row from an index row (for traces no results file names)."""
    success = r["success"]
    return {"task_id": r["task_id"] or r["name"], "benchmark": r["benchmark"], "split": r["split"],
            "subset": r["subset"], "trial": r["trial"] or 0, "model": r["model"], "recipe": r["recipe"],
            "success": None if success is None else bool(success), "score": r["score"],
            "stop_reason": r["stop_reason"], "steps": r["steps"] or 0, "latency_seconds": r["latency"] or 0.0,
            "token_usage": {"total_tokens": r["tokens"] or 0}, "cost": r["cost"], "run_spec_ref": r["run_spec_ref"],
            "trace_run_dir": r["name"], "metadata": {}}


def run_name(row: dict[str, Any]) -> str | None:
    ref = row.get("trace_run_dir")
    if not isinstance(ref, str) or not ref:
        return None
    return ref.rstrip("/\\").replace("\\", "/").rsplit("/", 1)[-1] or None


def _finish(conf: Configuration, traces: dict[str, Any]) -> Configuration:
    infos = [traces.get(n) for n in conf.run_names if n]
    infos = [i for i in infos if i is not None]
    recipes = {r.get("recipe") or (r.get("metadata") or {}).get("recipe") for r in conf.rows}
    recipes |= {i["recipe"] for i in infos}
    conf.recipe = _label(recipes)
    conf.model = _label({r.get("model") for r in conf.rows}) or _label({i["model"] for i in infos})
    officials = {bool(i["official"]) for i in infos}
    conf.read_gold = any(i["unaided"] == 0 for i in infos)
    conf.official = "mixed" if len(officials) > 1 else ("yes" if officials == {True} else "no")
    conf.metrics = summarize(conf.rows)
    return conf


class ConfigCatalog:
    """All configurations of a board. A results file's configurations are rebuilt only when that file
    changes (a running benchmark appends to one file), the traces no file names whenever the index does."""

    def __init__(self, index: RunIndex, results: Callable[[], list[tuple[Path, list[dict[str, Any]]]]]) -> None:
        self.index = index
        self.results = results  # (path, deduplicated rows) of each results file
        self._files: dict[Path, tuple[tuple[int, int], list[Configuration]]] = {}
        self._cache: tuple[Any, list[Configuration]] | None = None

    def all(self) -> list[Configuration]:
        state = (self.index.version, tuple(_file_state(p) for p in self.index.results))
        if self._cache is None or self._cache[0] != state:
            self._cache = (state, self._build())
        return self._cache[1]

    def get(self, ident: str) -> Configuration | None:
        return next((c for c in self.all() if c.id == ident), None)

    def benchmarks(self) -> dict[str, list[Configuration]]:
        out: dict[str, list[Configuration]] = {}
        for conf in self.all():
            out.setdefault(conf.benchmark or NO_BENCHMARK, []).append(conf)
        return out

    def _traces(self, where: str, params: tuple[Any, ...] = ()) -> dict[str, Any]:
        return {r["name"]: r for r in self.index.query(f"SELECT name, recipe, model, official, unaided FROM runs {where}", params)}

    def _file_configs(self, path: Path, rows: list[dict[str, Any]]) -> list[Configuration]:
        state = _file_state(path)
        cached = self._files.get(path)
        if cached is not None and cached[0] == state:
            return cached[1]
        traces = self._traces("WHERE results_file = ?", (str(path),))
        confs = [_finish(Configuration(config_id(str(path), key), path, *key[:4], rows=group,
                                       run_names=[run_name(r) for r in group]), traces)
                 for key, group in group_rows(rows, list(CONFIG_KEYS)).items()]
        self._files[path] = (state, confs)
        return confs

    def _build(self) -> list[Configuration]:
        out: list[Configuration] = []
        seen = set()
        for path, rows in self.results():
            out += self._file_configs(path, rows)
            seen.add(path)
        for gone in set(self._files) - seen:
            del self._files[gone]
        loose_rows = self.index.query("SELECT * FROM runs WHERE results_file IS NULL")
        traces = {r["name"]: r for r in loose_rows}
        loose = [_index_row(r) for r in loose_rows]
        for key, group in group_rows(loose, list(CONFIG_KEYS)).items():
            conf = Configuration(config_id("", key), None, *key[:4], rows=group,
                                 run_names=[r["trace_run_dir"] for r in group])
            out.append(_finish(conf, traces))
        out.sort(key=lambda c: (c.benchmark or "", c.split or "", c.subset or "", -(c.success_rate or -1), c.id))
        _name_uniquely(out, self._generation)
        return out

    def _generation(self, conf: Configuration) -> dict[str, Any]:
        """The generation controls (and the server) of a configuration, from its first trace's RunSpec."""
        import json

        for name in conf.run_names:
            if not name:
                continue
            try:
                manifest = json.loads((self.index.logdir / name / "manifest.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            spec = manifest.get("run_spec") if isinstance(manifest, dict) else None
            if isinstance(spec, dict):
                gen = spec.get("generation") if isinstance(spec.get("generation"), dict) else {}
                server = spec.get("model_server") if isinstance(spec.get("model_server"), dict) else {}
                return {**gen, **({"server": f"{server.get('name')} {server.get('version')}"} if server else {})}
        return {}


def _file_state(path: Path) -> tuple[int, int]:
    try:
        st = path.stat()
    except OSError:
        return (0, 0)
    return (st.st_mtime_ns, st.st_size)


def _settings_apart(group: list[Configuration], generation: Callable[[Configuration], dict[str, Any]]) -> dict[str, str]:
    """`top_p=0.9, extra_body=...`: the generation controls that differ within a group of configurations."""
    import json

    gens = {c.id: generation(c) for c in group}
    keys = sorted({k for g in gens.values() for k in g
                   if len({json.dumps(other.get(k), sort_keys=True) for other in gens.values()}) > 1})
    show = lambda v: v if isinstance(v, str) else json.dumps(v, sort_keys=True)  # noqa: E731
    return {ident: ", ".join(f"{k}={show(g.get(k))}" for k in keys) for ident, g in gens.items()}


def _name_uniquely(confs: list[Configuration],
                   generation: Callable[[Configuration], dict[str, Any]] | None = None) -> None:
    """Recipe · model, plus split/subset, the generation controls that differ (top_p, extra_body, the server...),
    results file or fingerprint where needed to tell them apart."""
    steps: list[Callable[[list[Configuration]], dict[str, str]]] = [
        lambda g: {c.id: "/".join(x for x in (c.split, c.subset) if x) for c in g},
        lambda g: _settings_apart(g, generation) if generation else {},
        lambda g: {c.id: c.source_label for c in g},
        lambda g: {c.id: (c.run_spec_ref or "")[:8] for c in g}, lambda g: {c.id: c.id for c in g}]
    names = {c.id: c.base_name for c in confs}
    for step in steps:
        seen: dict[tuple[str | None, str], list[Configuration]] = {}
        for c in confs:
            seen.setdefault((c.benchmark, names[c.id]), []).append(c)
        clashes = [group for group in seen.values() if len(group) > 1]
        if not clashes:
            break
        for group in clashes:
            extras = step(group)
            for c in group:
                extra = extras.get(c.id)
                if extra:
                    names[c.id] += f" · {extra}"
    for c in confs:
        c.display = names[c.id]
