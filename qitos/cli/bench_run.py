"""`qit bench run`: its flags, and how they become a RunConfig that the run machinery (`qitos.run`) plans and runs,
with the plan, progress and summary printed (`bench_progress`) and every way a run can stop worded on one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Optional

import typer

from .errors import EXIT_RUN_FAILED, UsageError, fail, user_errors
from .options import (ApiKeyEnv, BaseUrl, ExtraBody, MaxRetries, MaxTokens, ModelName, ReasoningEffort, RequestTimeout,
                      SecretEnv, Seed, Temperature, ThinkTags, TopP, TraceLogdir, mark_secrets)

DEFAULT_CONCURRENCY = 4  # tasks in flight when --concurrency is not given (benchmarks/concurrency.py compares to it)


def _options(pairs: list[str], flags: dict[str, tuple[str, object]]) -> dict[str, str]:
    """`--option` pairs (one flag may carry several: see `multi`) plus the flags that set options
    (`--user-model`); a key given twice with two values is refused, not silently the last one."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key:
            raise UsageError(f"--option '{pair}' must look like KEY=VALUE (several: --option a=1 b=2)")
        if key in out and out[key] != value:
            raise UsageError(f"--option {key} is given twice ({out[key]!r} and {value!r}); keep one")
        out[key] = value
    for key, (flag, value) in flags.items():
        if value is None:
            continue
        if key in out and out[key] != str(value):
            raise UsageError(f"{flag} {value} and --option {key}={out[key]} disagree; keep one")
        out[key] = str(value)
    return out


def _task_ids(value: str | None) -> list[str] | None:
    """`--task-ids a,b`; given but naming no id (`--task-ids ''`) is refused, never read as "every task"."""
    if value is None:
        return None
    ids = [t.strip() for t in value.split(",") if t.strip()]
    if not ids:
        raise UsageError(f"--task-ids {value!r} names no task; give comma-separated ids (e.g. --task-ids t1,t2) "
                         "or leave the flag out to run every task")
    return ids


@user_errors
def run(
    benchmark: Annotated[str, typer.Option("--benchmark", "-b", help="benchmark name (see `qit bench list`)")],
    split: Annotated[Optional[str], typer.Option(help="split (default: the benchmark's)")] = None,
    subset: Annotated[Optional[str], typer.Option(help="subset / domain / level / category")] = None,
    limit: Annotated[Optional[int], typer.Option(help="run only the first N tasks")] = None,
    task_ids: Annotated[Optional[str], typer.Option("--task-ids", help="comma-separated task ids")] = None,
    root: Annotated[Optional[Path], typer.Option(help="benchmark data root (file or folder)")] = None,
    data_dir: Annotated[Optional[Path], typer.Option(help="data directory (default $QITOS_DATA_DIR or ~/.cache/qitos/data)")] = None,
    variant: Annotated[Optional[str], typer.Option(help="prompt variant, where the benchmark has one")] = None,
    option: Annotated[list[str], typer.Option("--option", "-o", help="benchmark options KEY=VALUE, several after one flag "
                                                            "(`qit bench list --details` lists each benchmark's)")] = [],
    recipe: Annotated[Optional[str], typer.Option(help="baseline agent (default: the benchmark's)")] = None,
    runner: Annotated[Optional[str], typer.Option(help="your agent: module:callable(RecipeContext) -> AgentModule")] = None,
    validator: Annotated[bool, typer.Option("--validator", help="the --runner is a validator that takes gold "
                                            "(RecipeContext.oracle_gold): it runs on the scoring side, never official")] = False,
    agent_processes: Annotated[Optional[str], typer.Option(
        "--agent-processes", help="task: a fresh confined process per task; batch: tasks on threads of one confined "
                                  "agent process (faster, tasks share it); default: the benchmark's")] = None,
    asset_max_file: Annotated[Optional[str], typer.Option(
        "--asset-max-file", help="largest streamed asset (screenshot) of a task, e.g. 16M (default 16M); past it "
                                 "the task ends asset_quota")] = None,
    asset_max_run: Annotated[Optional[str], typer.Option(
        "--asset-max-run", help="all streamed assets of one task's trace, e.g. 512M (default 512M)")] = None,
    agent_memory: Annotated[Optional[str], typer.Option(
        "--agent-memory", help="memory of one task's agent processes together, e.g. 4G (default 4G; task ends "
                               "memory_limit)")] = None,
    agent_max_processes: Annotated[Optional[int], typer.Option(
        "--agent-max-processes", help="processes and threads of one task at once (default 256; process_limit)")] = None,
    agent_file_size: Annotated[Optional[str], typer.Option(
        "--agent-file-size", help="largest file a task's agent may write, e.g. 1G (default 1G; file_size_limit)")] = None,
    agent_cpu_seconds: Annotated[Optional[int], typer.Option(
        "--agent-cpu-seconds", help="CPU seconds of one task's agent processes (default 3600; cpu_time_limit)")] = None,
    model_name: ModelName = "local",
    base_url: BaseUrl = None,
    api_key_env: ApiKeyEnv = "OPENAI_API_KEY",
    temperature: Temperature = None,
    max_tokens: MaxTokens = None,
    seed: Seed = 0,
    top_p: TopP = None,
    reasoning_effort: ReasoningEffort = None,
    request_timeout: RequestTimeout = None,
    max_retries: MaxRetries = None,
    extra_body: ExtraBody = None,
    think_tags: ThinkTags = None,
    serve_arg: Annotated[list[str], typer.Option(
        "--serve-arg", help="extra flag for the server --model-name vllm/..., sglang/... or llamacpp/... starts "
                            "(repeatable; --serve-arg=--reasoning-parser --serve-arg=qwen3)")] = [],
    serve_timeout: Annotated[float, typer.Option(
        "--serve-timeout", help="seconds to wait for a server QitOS starts to answer /v1/models")] = 900.0,
    user_model: Annotated[Optional[str], typer.Option("--user-model", help="model of the simulated user (default: the agent's)")] = None,
    user_temperature: Annotated[Optional[float], typer.Option("--user-temperature", help="simulated user's temperature (default: not sent, as upstream tau-bench)")] = None,
    user_seed: Annotated[Optional[int], typer.Option("--user-seed", help="simulated user's seed (default: not sent, as upstream tau-bench)")] = None,
    user_top_p: Annotated[Optional[float], typer.Option("--user-top-p", help="simulated user's top_p (default: not sent)")] = None,
    user_reasoning_effort: Annotated[Optional[str], typer.Option("--user-reasoning-effort", help="simulated user's reasoning_effort (default: not sent)")] = None,
    user_request_timeout: Annotated[Optional[float], typer.Option("--user-request-timeout", help="simulated user's request timeout (default: the agent's)")] = None,
    user_max_retries: Annotated[Optional[int], typer.Option("--user-max-retries", help="simulated user's retries (default: the agent's)")] = None,
    user_extra_body: Annotated[Optional[str], typer.Option("--user-extra-body", metavar="JSON", help="JSON object merged into each simulated user request (default: none)")] = None,
    concurrency: Annotated[int, typer.Option(help="tasks in flight")] = DEFAULT_CONCURRENCY,
    trials: Annotated[int, typer.Option(help="trials per task (for pass^k)")] = 1,
    max_steps: Annotated[Optional[int], typer.Option(help="step budget per task")] = None,
    task_timeout: Annotated[Optional[float], typer.Option(help="seconds per task")] = None,
    output: Annotated[Optional[Path], typer.Option(help="results JSONL (resumed if it exists)")] = None,
    trace_logdir: TraceLogdir = "runs",
    executor: Annotated[str, typer.Option(help="local or ray")] = "local",
    workers: Annotated[str, typer.Option(help="local executor: processes sharing --concurrency, or auto (about one "
                                              "per 16 tasks in flight, at most two per core; when the agent has "
                                              "its own process, one per core, per task in flight and per 128 jobs; "
                                              "1 for the embedded model and for small --concurrency)")] = "auto",
    ray_address: Annotated[Optional[str], typer.Option(help="Ray cluster address (default: start a local one)")] = None,
    ray_resources: Annotated[Optional[str], typer.Option(
        "--ray-resources", help="Ray resources every job asks for, beyond its task's own needs: JSON or NAME=AMOUNT,"
                                "... (e.g. '{\"gpu_node\": 1}'; CPU=0.5 sets the CPU share, default 0.01)")] = None,
    retry_errors: Annotated[bool, typer.Option("--retry-errors", help="re-run task×trial pairs that ended in error")] = False,
    force: Annotated[bool, typer.Option("--force", help="append to a results file of another configuration")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="show the plan, run nothing")] = False,
    secret_env: SecretEnv = [],
) -> None:
    """Run a benchmark for real (resumable; rows appended to --output as tasks finish)."""
    mark_secrets(secret_env)
    from .paths import check_output_file, say_disk_full

    if output is not None:
        check_output_file(output)  # a directory, a read-only place: one line before anything runs
    from qitos.benchmark.base import LoadOptions
    from qitos.run.config import ModelConfig, RunConfig
    from qitos.trace.writer import ensure_writable_dir

    from .bench_progress import print_plan, print_summary, run_with_progress

    from qitos.models.generation import check_generation, parse_extra_body, replaced_flags

    body = parse_extra_body(extra_body)
    user_body = parse_extra_body(user_extra_body, "--user-extra-body")
    check_generation(top_p=top_p, reasoning_effort=reasoning_effort, max_retries=max_retries,
                     request_timeout=request_timeout)
    check_generation(top_p=user_top_p, reasoning_effort=user_reasoning_effort, max_retries=user_max_retries,
                     request_timeout=user_request_timeout, prefix="--user-")
    for warning in replaced_flags(body, {"temperature": temperature, "max_tokens": max_tokens, "top_p": top_p,
                                         "reasoning_effort": reasoning_effort}):
        typer.echo(f"warning: {warning}", err=True)
    opts = _options(option, {"user_model": ("--user-model", user_model or None),
                             "user_temperature": ("--user-temperature", user_temperature),
                             "user_seed": ("--user-seed", user_seed),
                             "user_top_p": ("--user-top-p", user_top_p),
                             "user_reasoning_effort": ("--user-reasoning-effort", user_reasoning_effort),
                             "user_request_timeout": ("--user-request-timeout", user_request_timeout),
                             "user_max_retries": ("--user-max-retries", user_max_retries),
                             "user_extra_body": ("--user-extra-body",
                                                 json.dumps(user_body, sort_keys=True) if user_body else None)})
    load = LoadOptions(root=root, split=split, subset=subset, limit=limit, variant=variant, options=opts,
                       task_ids=_task_ids(task_ids),
                       **({"data_dir": data_dir} if data_dir else {}))
    from qitos.run.cluster.placement import parse_resources
    from qitos.run.sides.limits import parse_limits

    try:
        limits = parse_limits(asset_max_file=asset_max_file, asset_max_run=asset_max_run, agent_memory=agent_memory,
                              agent_max_processes=agent_max_processes, agent_file_size=agent_file_size,
                              agent_cpu_seconds=agent_cpu_seconds)
    except ValueError as exc:
        raise UsageError(str(exc)) from None

    cfg = RunConfig(benchmark=benchmark, load=load, recipe=recipe, runner=runner, validator=validator, agent_processes=agent_processes,
                    limits=limits,
                    model=ModelConfig(model_name=model_name, base_url=base_url, api_key_env=api_key_env,
                                      temperature=temperature, max_tokens=max_tokens, seed=seed, top_p=top_p,
                                      reasoning_effort=reasoning_effort, extra_body=body,
                                      request_timeout=request_timeout, max_retries=max_retries,
                                      think_tags=think_tags, serve_args=serve_arg, serve_timeout=serve_timeout),
                    concurrency=concurrency, trials=trials, max_steps=max_steps, task_timeout=task_timeout,
                    output=output, trace_logdir=Path(trace_logdir), executor=executor, ray_address=ray_address,
                    ray_resources=parse_resources(ray_resources),
                    workers=workers, retry_errors=retry_errors, force=force, dry_run=dry_run)
    from qitos.run.lifetime import exit_code_for, raise_if_stopped, signal_of, stop_signals_raise
    from qitos.run.runner import plan_batch
    from qitos.run.sides.host import AgentHostError

    # SIGTERM / SIGHUP (timeout, docker stop, a scheduler) end the run as Ctrl-C does, from planning to the summary
    plan = None
    with stop_signals_raise():
        try:
            if output is None and not dry_run:  # before the run lock is taken beside it
                check_output_file(cfg.default_output(), "--output (default)")
            plan = plan_batch(cfg)  # checks flags, data and the model first: a refused run writes nothing
            raise_if_stopped()  # a stop signal whose exception a finalizer swallowed while the run was planned
            for warning in plan.warnings:
                typer.echo(f"warning: {warning}", err=True)
            print_plan(plan)
            if dry_run:
                return
            ensure_writable_dir(cfg.trace_logdir)
            try:
                outcome = run_with_progress(plan)  # a signal while tasks run: in-flight runs end cancelled
                if not outcome.cancelled:
                    raise_if_stopped()  # ... unless a finalizer swallowed it: the run still ends stopped
            except OSError as exc:  # e.g. the disk filled while a row was appended: name where (one line)
                if exc.filename is None:
                    exc.filename = f"{plan.output} (results) or {cfg.trace_logdir}/ (traces)"
                raise
            print_summary(plan, outcome)
            say_disk_full(outcome.tally.reasons.get("disk_full", 0), cfg.trace_logdir)
        except AgentHostError as exc:  # the agent's process could not start, or died while the run planned
            where = "before the run started: nothing written" if plan is None else "while the run was closing"
            fail(f"the agent process failed {where}: {' '.join(str(exc).split())[:400]}", EXIT_RUN_FAILED)
        except KeyboardInterrupt as exc:  # before the run started, or while it was closing down
            where = "before the run started: nothing written" if plan is None else (
                f"while the run was closing: finished rows are saved in {plan.output}; rerun to resume")
            typer.echo(f"stopped {where}", err=True)
            raise typer.Exit(exit_code_for(signal_of(exc))) from None
        finally:  # a run refused after planning (e.g. its --trace-logdir) leaves no lock file beside the results
            if plan is not None and plan.lock is not None:
                plan.lock.release()
    if outcome.exit_code:
        raise typer.Exit(outcome.exit_code)
