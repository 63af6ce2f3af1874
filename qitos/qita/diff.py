"""What differs between two runs, or two results files: config, trajectory, metrics.

Config: every differing field of RunSpec and ExperimentSpec (flattened to dotted keys; tool
manifests keyed by tool name, so reordering tools is not a difference) plus the manifest's
identity fields. Trajectory: steps aligned by position; the first diverging step is the first
where the decision (actions, arguments, final answer) or the observations differ, or where one
run has no step. A model text that differs while the decision is the same is reported but is
not a divergence (live models rarely repeat their wording).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qitos.benchmark.metrics import dedupe, summarize
from qitos.results.rows import RowIssue, iter_rows

from .paired import compare_paired
from .runtrace import RunFiles, StepDigest, read_manifest_view

IDENTITY_FIELDS = ("status", "model_id", "model_family", "prompt_protocol", "parser_name", "prompt_hash",
                   "tool_manifest_hash", "seed", "git_sha", "package_version", "benchmark_name", "benchmark_split",
                   "replay_mode", "official_run")
SECTIONS = ("run_spec", "experiment_spec")


@dataclass
class FieldDiff:
    section: str
    key: str
    a: Any
    b: Any

    def as_dict(self) -> dict[str, Any]:
        return {"section": self.section, "key": self.key, "a": self.a, "b": self.b}


_MISSING = "(absent)"


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted keys down to scalars; lists of named objects are keyed by name, other lists kept whole."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key in sorted(value):
            out.update(flatten(value[key], f"{prefix}.{key}" if prefix else str(key)))
        return out or {prefix: {}}
    if isinstance(value, list) and value and all(isinstance(v, dict) and "name" in v for v in value):
        out = {}
        for item in value:
            out.update(flatten({k: v for k, v in item.items() if k != "name"}, f"{prefix}[{item['name']}]"))
        return out
    return {prefix: value}


def config_diff(a: dict[str, Any], b: dict[str, Any]) -> list[FieldDiff]:
    """Differing fields between two manifests (as dicts), in a stable order."""
    diffs: list[FieldDiff] = []
    for name in IDENTITY_FIELDS:
        if a.get(name) != b.get(name):
            diffs.append(FieldDiff("manifest", name, a.get(name, _MISSING), b.get(name, _MISSING)))
    for section in SECTIONS:
        fa = flatten(a.get(section) or {})
        fb = flatten(b.get(section) or {})
        for key in sorted(set(fa) | set(fb)):
            va, vb = fa.get(key, _MISSING), fb.get(key, _MISSING)
            if key == "fingerprint" or va == vb:
                continue
            diffs.append(FieldDiff(section, key, va, vb))
    return diffs


@dataclass
class Divergence:
    position: int  # 0-based index into the aligned pairs
    step_id: int
    reason: str

    def as_dict(self) -> dict[str, Any]:
        return {"position": self.position, "step_id": self.step_id, "reason": self.reason}


def first_divergence(a: list[StepDigest], b: list[StepDigest]) -> Divergence | None:
    for i in range(max(len(a), len(b))):
        sa = a[i] if i < len(a) else None
        sb = b[i] if i < len(b) else None
        if sa is None or sb is None:
            present = sa or sb
            assert present is not None
            which = "A" if sa else "B"
            return Divergence(i, present.step_id, f"only run {which} has step {present.step_id}")
        if sa.action != sb.action:
            if sa.mode == sb.mode == "final":
                reason = "final answer differs"
            elif sa.label == sb.label:
                reason = f"same action ({sa.label}), different arguments"
            else:
                reason = f"action differs ({sa.label} vs {sb.label})"
            return Divergence(i, sa.step_id, reason)
        if sa.observation != sb.observation:
            return Divergence(i, sa.step_id, "same action, different observation")
    return None


def text_differs(a: list[StepDigest], b: list[StepDigest]) -> list[int]:
    """Positions where both runs decided the same but the model wrote different text."""
    return [i for i, (sa, sb) in enumerate(zip(a, b)) if sa.action == sb.action and sa.text != sb.text]


def reasoning_differs(a: list[StepDigest], b: list[StepDigest]) -> list[int]:
    """Positions where both runs have a step and the model's reasoning differs."""
    return [i for i, (sa, sb) in enumerate(zip(a, b)) if sa.reasoning != sb.reasoning]


def reasoning_diff(a: str | None, b: str | None, context: int = 2, limit: int = 400) -> dict[str, Any] | None:
    """A line diff of two steps' reasoning: unchanged lines near changes, `-` only in A, `+` only in B."""
    import difflib

    la, lb = (a or "").splitlines(), (b or "").splitlines()
    if la == lb:
        return None
    lines: list[tuple[str, str]] = []
    removed = added = 0
    for group in difflib.SequenceMatcher(a=la, b=lb, autojunk=False).get_grouped_opcodes(context):
        if lines:
            lines.append((" ", "…"))
        for op, i1, i2, j1, j2 in group:
            if op == "equal":
                lines += [(" ", x) for x in la[i1:i2]]
                continue
            lines += [("-", x) for x in la[i1:i2]] + [("+", x) for x in lb[j1:j2]]
            removed, added = removed + i2 - i1, added + j2 - j1
    return {"lines": lines[:limit], "removed": removed, "added": added, "truncated": len(lines) > limit}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def metric_deltas(a: dict[str, Any], b: dict[str, Any], keys: list[str]) -> list[dict[str, Any]]:
    out = []
    for key in keys:
        va, vb = a.get(key), b.get(key)
        na, nb = _number(va), _number(vb)
        delta: float | int | None = None
        if na is not None and nb is not None:
            delta = vb - va if isinstance(va, int) and isinstance(vb, int) else nb - na
        out.append({"metric": key, "a": va, "b": vb, "delta": delta})
    return out


def run_metrics(manifest: dict[str, Any], steps: int) -> dict[str, Any]:
    summary = manifest.get("summary") or {}
    usage = manifest.get("token_usage") or summary.get("token_usage") or {}
    return {"status": manifest.get("status"), "stop_reason": summary.get("stop_reason"), "steps": steps,
            "total_tokens": usage.get("total_tokens"), "cost": manifest.get("cost"),
            "latency_seconds": manifest.get("latency_seconds"), "final_result": summary.get("final_result")}


RUN_METRICS = ["status", "stop_reason", "steps", "total_tokens", "cost", "latency_seconds", "final_result"]


def diff_runs(dir_a: Path, dir_b: Path) -> dict[str, Any]:
    """Config diff, first divergence and metric deltas of two run directories (for the CLI)."""
    files = [RunFiles(Path(dir_a)), RunFiles(Path(dir_b))]
    for f in files:
        f.refresh()
    views = [f.manifest() for f in files]
    digests = [f.digests() for f in files]
    divergence = first_divergence(*digests)
    metrics = [run_metrics(v.data, len(d)) for v, d in zip(views, digests)]
    return {
        "kind": "runs", "a": str(dir_a), "b": str(dir_b),
        "problems": {side: v.problem for side, v in zip("ab", views) if v.problem},
        "config": [d.as_dict() for d in config_diff(views[0].data, views[1].data)],
        "steps": [len(d) for d in digests],
        "first_divergence": divergence.as_dict() if divergence else None,
        "text_only_differences": [digests[0][i].step_id for i in text_differs(*digests)],
        "metrics": metric_deltas(metrics[0], metrics[1], RUN_METRICS),
    }


RESULT_METRICS = ["total", "tasks", "scored", "successes", "success_rate", "mean_score", "mean_steps", "total_tokens",
                  "total_cost", "mean_latency_seconds"]


def result_config(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What a results file was run with, as far as its rows say."""
    def values(key: str) -> list[Any]:
        return sorted({str(r.get(key)) for r in rows if r.get(key) is not None})
    return {"benchmark": values("benchmark"), "split": values("split"), "subset": values("subset"),
            "model": values("model"), "run_spec_ref": values("run_spec_ref")}


def first_trace(rows: list[dict[str, Any]], results_file: Path) -> dict[str, Any] | None:
    """Manifest of the first row's trace that can be found (paths are as written, or relative to the file)."""
    for row in rows:
        ref = row.get("trace_run_dir")
        if not isinstance(ref, str) or not ref:
            continue
        for candidate in (Path(ref), results_file.parent / ref):
            if (candidate / "manifest.json").is_file():
                view = read_manifest_view(candidate)
                if view.data:
                    return view.data
    return None


def diff_results(path_a: Path, path_b: Path) -> dict[str, Any]:
    """Config (rows' identity, plus the RunSpecs of their traces when found), metric deltas, paired comparison."""
    issues: list[RowIssue] = []
    paths = [Path(path_a), Path(path_b)]
    rows = [dedupe(iter_rows(p, issues)) for p in paths]
    metrics = [summarize(r) for r in rows]
    for m in metrics:
        for k, v in m["pass_hat_k"].items():
            m[f"pass^{k}"] = v
    ks = sorted({k for m in metrics for k in m["pass_hat_k"]}, key=int)
    configs = [result_config(r) for r in rows]
    config = [{"section": "results", "key": k, "a": configs[0][k], "b": configs[1][k]}
              for k in configs[0] if configs[0][k] != configs[1][k]]
    traces = [first_trace(r, p) for r, p in zip(rows, paths)]
    if traces[0] is not None and traces[1] is not None:
        config += [d.as_dict() for d in config_diff(traces[0], traces[1]) if d.section != "manifest"]
    paired = compare_paired(rows[0], rows[1])
    return {"kind": "results", "a": str(path_a), "b": str(path_b), "config": config,
            "metrics": metric_deltas(metrics[0], metrics[1], RESULT_METRICS + [f"pass^{k}" for k in ks]),
            "paired": paired.as_dict(), "issues": [str(i) for i in issues]}


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
