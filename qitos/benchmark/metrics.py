"""Aggregate result rows honestly: every selected task × trial counts, whatever happened to it.

Headline `success_rate` = successes / (selected tasks × trials requested): a row that was not
scored (setup_failed, requires_unavailable, an evaluator crash, ...) and a trial with no row at
all count as failures. Beside it: `coverage` (scored / selected) and `scored_success_rate` (the
rate over scored rows only), with counts and the unscored rows by stop reason, so a harness that
crashes on half the tasks never looks as good as one that runs them all.
Beside them, `do_nothing_floor`: what an agent that does nothing reaches on the same selection, where the
benchmark's rule says (`floor.py`).

pass^k for a task with n requested trials and c successes is C(c,k)/C(n,k); the reported value is
the mean over every selected task (a task without rows scores 0), as Tau-Bench's reference defines it.

Rows of different configurations (`run_spec_ref`, and `model` and `recipe` for rows without one)
are never merged: the default grouping keeps them apart, and exact duplicates within one
configuration are reported, not silently dropped. A row `qit bench eval` found at odds with its
trace (`trace_mismatch`) is unscored here, whatever it claimed.
Works on plain dicts (not pydantic objects) so `qit bench eval` stays fast on 100,000 rows.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import Any, Iterable

from qitos.benchmark.floor import floor_summary

# model and recipe keep apart rows that have no run_spec_ref (older or foreign rows); with one, the
# fingerprint covers them already
CONFIG_FIELDS = ["benchmark", "split", "subset", "run_spec_ref", "model", "recipe"]
TRACE_MISMATCH = "does not match its trace"
ROW_REQUIRED = ("task_id", "benchmark", "stop_reason")


def wilson_interval(successes: int, total: int, z: float = 1.959964) -> tuple[float, float]:
    if total == 0:
        return (0.0, 0.0)
    p = successes / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_hat_k(per_task: dict[str, tuple[int, int]], k: int, tasks: int | None = None) -> float | None:
    """Mean of C(c, k) / C(n, k) over `tasks` tasks (default: those in `per_task`; absent ones score 0)."""
    values = [math.comb(c, k) / math.comb(n, k) for n, c in per_task.values() if n >= k]
    denominator = tasks if tasks is not None else len(values)
    return sum(values) / denominator if denominator else None


def selection(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(selected tasks, trials requested) of a group of rows of one configuration.

    Rows written by `qit bench run` carry both; older or foreign rows fall back to what they show.
    """
    task_ids = {r["task_id"] for r in rows}
    declared = [r.get("selected_tasks") for r in rows if isinstance(r.get("selected_tasks"), int)]
    tasks = max([len(task_ids), *declared])
    trials_declared = [r.get("trials_requested") for r in rows if isinstance(r.get("trials_requested"), int)]
    per_task = Counter(r["task_id"] for r in rows)
    seen_trials = max((int(r.get("trial") or 0) + 1 for r in rows), default=0)
    trials = max([seen_trials, max(per_task.values(), default=0), *trials_declared])
    return tasks, trials


def proportion(successes: int, scored: int, selected: int) -> dict[str, Any]:
    """One honest proportion: the rate over everything selected, coverage, and the rate over scored rows."""
    low, high = wilson_interval(successes, selected)
    s_low, s_high = wilson_interval(successes, scored)
    return {
        "successes": successes, "scored": scored, "selected": selected,
        "rate": successes / selected if selected else None,
        "ci95": [low, high] if selected else None,
        "coverage": scored / selected if selected else None,
        "scored_rate": successes / scored if scored else None,
        "scored_ci95": [s_low, s_high] if scored else None,
    }


def proportion_of(rows: list[dict[str, Any]], selected: int | None = None) -> dict[str, Any]:
    """`proportion` over rows (unscored rows count as failures); `selected` defaults to the row count."""
    scored = sum(1 for r in rows if r.get("success") is not None)
    successes = sum(1 for r in rows if r.get("success"))
    return proportion(successes, scored, max(selected or 0, len(rows)))


def dedupe(rows: Iterable[dict[str, Any]], issues: list[str] | None = None) -> list[dict[str, Any]]:
    """The last row per (configuration, task, trial): a rerun of the same configuration wins.

    Rows of different configurations (run_spec_ref, model, recipe) are all kept. Each replaced row is
    reported in `issues` when given, so nothing is dropped silently.
    """
    latest: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        key = (row.get("benchmark"), row.get("split"), row.get("subset"), row.get("run_spec_ref"), row.get("model"),
               row.get("recipe"), row["task_id"], row.get("trial", 0))
        if key in latest and issues is not None:
            issues.append(f"duplicate row for task {row['task_id']} trial {row.get('trial', 0)} "
                          f"(RunSpec {row.get('run_spec_ref')}): the later row is used")
        latest[key] = row
    return list(latest.values())


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Generic metrics of a group of rows of one configuration, in one pass (fast on 100,000 rows)."""
    scored = successes = steps = tokens = cost_rows = 0
    score_sum = cost_sum = latency = 0.0
    score_n = 0
    reasons: Counter = Counter()
    unscored: Counter = Counter()
    per_task: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        task_id = r["task_id"]
        reason = r.get("stop_reason")
        reasons[reason] += 1
        entry = per_task[task_id]
        success = r.get("success")
        if success is None:
            unscored[TRACE_MISMATCH if "trace_mismatch" in r else reason] += 1
        else:
            scored += 1
            if success:
                successes += 1
                entry[1] += 1
        score = r.get("score")
        if score is not None and score.__class__ in (int, float):
            score_sum += score
            score_n += 1
        usage = r.get("token_usage")
        if usage:
            tokens += usage.get("total_tokens") or 0
        cost = r.get("cost")
        if cost is not None and cost.__class__ in (int, float):
            cost_sum += cost
            cost_rows += 1
        latency += r.get("latency_seconds") or 0.0
        steps += r.get("steps") or 0
    n = len(rows)
    selected_tasks, trials = selection(rows) if rows else (0, 0)
    selected = max(selected_tasks * trials, n)
    missing = selected - n
    if missing:
        unscored["missing (no row)"] = missing
    tasks = {k: (trials, v[1]) for k, v in per_task.items()}
    rate = proportion(successes, scored, selected)
    return {
        "total": n,
        "tasks": len(per_task),
        "selected_tasks": selected_tasks,
        "trials_requested": trials,
        "selected": selected,
        "scored": scored,
        "successes": successes,
        "success_rate": rate["rate"],
        "success_ci95": rate["ci95"],
        "coverage": rate["coverage"],
        "scored_success_rate": rate["scored_rate"],
        "scored_success_ci95": rate["scored_ci95"],
        "unscored": n - scored + missing,
        "unscored_by_reason": dict(unscored.most_common()),
        "mean_score": score_sum / selected if selected and score_n else None,
        "mean_score_scored": score_sum / score_n if score_n else None,
        "pass_hat_k": {str(k): pass_hat_k(tasks, k, selected_tasks) for k in range(1, trials + 1)},
        # what an agent that does nothing reaches on the same selection, where the benchmark's rule says (floor.py)
        "do_nothing_floor": floor_summary(rows, selected_tasks, trials),
        "stop_reasons": dict(reasons.most_common()),
        "mean_steps": steps / n if n else None,
        "total_tokens": tokens,
        "mean_tokens": tokens / n if n else None,
        "total_cost": cost_sum if cost_rows else None,
        "cost_unknown_rows": n - cost_rows,
        "mean_latency_seconds": latency / n if n else None,
    }


def group_rows(rows: list[dict[str, Any]], by: list[str]) -> dict[tuple, list[dict[str, Any]]]:
    groups: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[tuple(_field(row, k) for k in by)].append(row)
    return groups


def _field(row: dict[str, Any], name: str) -> Any:
    """A row field, or a metadata key (`--by level` reads metadata.level)."""
    if name in row:
        value = row[name]
    else:
        value = (row.get("metadata") or {}).get(name)
    return tuple(value) if isinstance(value, list) else value


def known_fields(rows: list[dict[str, Any]], names: list[str]) -> list[str]:
    """The names in `names` that no row has as a field or a metadata key."""
    return [n for n in names if not any(n in r or n in (r.get("metadata") or {}) for r in rows)]


def configuration_labels(described: dict[tuple, dict[str, Any]]) -> dict[tuple, str]:
    """Name each configuration by the settings that set it apart from the others (model, recipe, max_steps...)."""
    varying = sorted({f for d in described.values() for f in d
                      if len({str(other.get(f)) for other in described.values()}) > 1})
    return {key: ", ".join(f"{f}={d.get(f)}" for f in varying) or "one configuration" for key, d in described.items()}


def row_description(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """What rows alone say about their configuration (a RunSpec from the trace says more)."""
    first = rows[0]
    return {"model": first.get("model"), "recipe": first.get("recipe"), "run_spec": first.get("run_spec_ref")}


def evaluate_rows(rows: list[dict[str, Any]], by: list[str] | None = None, plugin_metrics=None,
                  issues: list[str] | None = None, describe=row_description) -> list[dict[str, Any]]:
    """One entry per group: {"group", "label", "metrics", "benchmark_metrics"}.

    The default grouping is the configuration (benchmark, split, subset, run_spec_ref, model, recipe); a custom
    `by` still keeps configurations apart inside each group when deduplicating. `describe` says what
    a group's configuration is, for labels that name what differs between groups.
    """
    by = list(by or CONFIG_FIELDS)
    rows = dedupe(rows, issues)
    groups = group_rows(rows, by)
    labels = configuration_labels({k: describe(g) for k, g in groups.items()}) if "run_spec_ref" in by else {}
    out = []
    for key, group in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        entry: dict[str, Any] = {"group": dict(zip(by, key)), "metrics": summarize(group)}
        if key in labels:
            entry["label"] = labels[key]
        if plugin_metrics is not None:
            entry["benchmark_metrics"] = plugin_metrics(group)
        out.append(entry)
    return out
