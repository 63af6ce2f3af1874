"""The RunSpec of a benchmark run, built on the scoring side: the agent side describes its own agent (prompt
protocol, parser, tools); the model, the environment, the budget, the code's identity and the benchmark's
configuration come from this side's own view, never from the agent's claim.
"""

from __future__ import annotations

import os
import socket
from typing import TYPE_CHECKING, Any

import orjson

from qitos.core.task import Task
from qitos.spec.provenance import environment_summary, package_version, qitos_checkout
from qitos.spec.run_spec import RunSpec

if TYPE_CHECKING:
    from qitos.run.job_context import JobContext

MODEL_FIELDS = ("model_name", "model_family", "model_provider", "base_url_host")


def trusted_run_spec(ctx: "JobContext", task: Task, description: dict[str, Any]) -> RunSpec:
    """The RunSpec: the agent's description of itself, everything else from this side.

    Built once per run for each description and task budget (a batch's tasks mostly share both), then copied:
    a task costs a lookup, not a build and a fingerprint. The memo is this process's (a worker forked or a node
    sent the context builds its own) and is dropped when the runner's code identity (`ctx.closure`) changes."""
    try:  # orjson: this key is made for every task, on the hub's thread (a tenth of the stdlib's time)
        key = orjson.dumps([description, task.budget.model_dump(mode="json")], default=str,
                           option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    except (TypeError, ValueError):  # not plain data: built every time
        return _build_run_spec(ctx, task, description)
    where = (socket.gethostname(), os.getpid(), id(ctx.closure))
    memo = ctx.__dict__.get("_run_spec_memo")
    if memo is None or memo[0] != where or memo[1] is not ctx.closure:
        memo = ctx.__dict__["_run_spec_memo"] = (where, ctx.closure, {})
    specs = memo[2]
    spec = specs.get(key)
    if spec is None:
        spec = _build_run_spec(ctx, task, description)
        spec.fingerprint()  # computed once, carried by every copy
        if len(specs) < 256:
            specs[key] = spec
    return spec.model_copy()


def _build_run_spec(ctx: "JobContext", task: Task, description: dict[str, Any]) -> RunSpec:
    cfg = ctx.cfg
    model = ctx.probe_model()  # the model's identity is the run's configuration, never the agent side's claim
    description = {**{k: v for k, v in description.items() if k not in MODEL_FIELDS},
                   "model_name": model.name, "model_family": model.family, "model_provider": model.provider,
                   "base_url_host": getattr(model, "base_url_host", None)}
    sha, dirty = qitos_checkout()
    environment = {**environment_summary(cfg.executor), "agent_side": ctx.agent_side_kind(),
                   "agent_processes": ctx.agent_processes(), "agent_limits": cfg.limits.record()}
    return RunSpec(**description, environment=environment, seed=cfg.model.seed,
                   stop_criteria={"parse_error_limit": cfg.parse_error_limit, "tool_error_limit": cfg.tool_error_limit},
                   budget=task.budget.model_dump(), git_sha=sha, git_dirty=dirty, package_version=package_version(),
                   **ctx.run_spec_extra())
