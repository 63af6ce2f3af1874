"""Scoring side (rows, never in a run): upstream CyBench's run logs out and in (`qit bench export|import
--format cybench`).

Upstream's `run_task.py` (commit 6c3702c) writes one JSON per task run, `asdict(TaskRunCompletion)`, at
`logs/<task name>/<deployment name>/<benchmark id>/<model>_<success|fail>[_subtask]_<task name>_run_log.json`:
`task` (path, name, categories, competition, difficulty, subtasks with their answers), `task_run_input`
(`agent_config.deployment_name`, `task_run_config.run_with_subtasks`, the subtask config), `subtask_completions`
(`subtask_<n>`: `iterations` of `model_input` / `model_response` / `execution_output`, `score`,
`completion_status`), `num_subtasks`, `num_correct_subtasks`, `usage`, `time_taken_in_ms`, `status`. Unguided, the
subtasks are upstream's one "What is the flag?" question. `grade_benchmark.py` reads these files from `./logs`.

Export writes that layout from QitOS rows (the folder given is upstream's `logs/`): the task and its answers from
the task data, one iteration per command the trace records (the command and the output the agent saw) and one answer iteration per submission (stdout = the answer, as upstream's agent logs it). A row
without a trace has only its answer iterations. Rows that never ran or were never scored get no log, as upstream
(its run crashed before writing one). Import reads logs back into rows and traces that `qit bench eval` and qita
show; re-exported, they give the same logs' figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from qitos.spec.run_spec import RunSpec
from qitos.trace.reader import TraceReadError, load_run
from qitos.trace.redact import redact_text
from qitos.trace.schema import RunSummary
from qitos.trace.writer import TraceWriter, new_run_id

from qitos.benchmark.errors import BenchmarkUsageError
from qitos.results.rows import BenchmarkRunResult, ResultsFile, iter_rows
from qitos.results.trace_check import TraceCheck, row_run_dir
from qitos.benchmark.cybench.metrics import upstream_flag_seen, upstream_logged
from qitos.benchmark.cybench.tasks import UNGUIDED_QUESTION, CybenchTask, load_task, read_task_list, task_id_for

LOG_SUFFIX = "_run_log.json"


def _part(text: str) -> str:
    """A name as one path part, as upstream makes it (spaces to `_`); a `/` in a model id, which would nest
    upstream's folders, becomes `_` too."""
    part = text.replace(" ", "_").replace("/", "_").replace("\0", "")
    return part if part.strip(".") else "unknown"


def _model(row: dict[str, Any]) -> str:
    """The deployment name of a row: its model, else (a recipe such as the oracle) `qitos-<recipe>`."""
    return str(row.get("model") or f"qitos-{row.get('recipe') or 'unknown'}")


def _subtask_json(question: str, subtask: Any) -> dict[str, Any]:
    return {"question": question, "answer": subtask.answer, "answer_format": subtask.answer_format,
            "hints": list(subtask.hints), "commands": list(subtask.commands),
            "annotator_note": subtask.annotator_note, "cyber_metadata": None}


def _upstream_subtasks(task: CybenchTask, guided: bool) -> list[dict[str, Any]]:
    """Upstream's `subtask_config.tasks`: the task's subtasks, or (unguided) `unguided_mode()`'s one question."""
    if guided:
        return [_subtask_json(s.question, s) for s in task.subtasks]
    last = task.subtasks[-1]
    return [{"question": UNGUIDED_QUESTION, "answer": last.answer, "answer_format": last.answer_format,
             "hints": [h for s in task.subtasks for h in s.hints],
             "commands": [c for s in task.subtasks for c in s.commands],
             "annotator_note": "\n".join(s.annotator_note for s in task.subtasks), "cyber_metadata": None}]


def _commands(run_dir: Path | None) -> list[dict[str, Any]]:
    """The commands of a trace with their outputs, `{subtask, command, output}` in order: the scoring side's
    `cybench_command` events (a split run's), else the agent side's `shell` tool calls and results, each under
    the question its `env_step` `question_start` opened."""
    if run_dir is None:
        return []
    try:
        events = load_run(run_dir).events
    except TraceReadError:
        return []
    scored = [dict(e.payload or {}) for e in events if e.kind == "cybench_command"]
    if scored:
        return scored
    commands: list[dict[str, Any]] = []
    subtask, pending = 0, None
    for event in events:
        payload = event.payload or {}
        if event.kind == "env_step" and payload.get("event") == "question_start":
            subtask = int(payload.get("subtask") or 0)
        elif event.kind == "tool_call" and payload.get("name") == "shell":
            pending = str((payload.get("arguments") or {}).get("command", ""))
        elif event.kind == "tool_result" and payload.get("name") == "shell" and pending is not None:
            commands.append({"subtask": subtask, "command": pending, "output": payload.get("output")})
            pending = None
    return commands


def _iteration(response: str, command_type: str, command: str, stdout: str | None) -> dict[str, Any]:
    return {"model_input": {"value": "", "num_tokens": 0},
            "model_response": {"value": response, "full_response": response, "time_taken_in_ms": 0,
                               "num_tokens": 0},
            "execution_output": {"command": {"command_type": command_type, "command_str": command},
                                 "stdout": stdout, "stderr": None}}


def run_log(row: dict[str, Any], task: CybenchTask, commands: list[dict[str, Any]]) -> dict[str, Any]:
    """One row as upstream's `asdict(TaskRunCompletion)`."""
    meta = row.get("metadata") or {}
    guided = meta.get("split", row.get("split")) == "guided"
    subtasks = _upstream_subtasks(task, guided)
    iteration_config = {"max_iterations": None, "iterations_until_hint": None}
    completions: dict[str, Any] = {}
    for index, (subtask, result) in enumerate(zip(subtasks, meta["subtasks"], strict=False)):
        iterations = [_iteration(f"Command: {c.get('command')}", "shell_command", str(c.get("command")),
                                 c.get("output")) for c in commands if c.get("subtask") == index]
        prediction = result.get("prediction")
        if prediction is not None:
            iterations.append(_iteration(f"Answer: {prediction}", "answer", prediction, prediction))
        completions[f"subtask_{index + 1}"] = {
            "iterations": iterations, "iteration_config": iteration_config, "subtask": subtask,
            "score": 1 if result.get("correct") else 0, "time_taken_in_ms": 0,
            "completion_status": "answered" if prediction is not None else "not_answered",
            "solved_with_hint": False}
    usage = row.get("token_usage") or {}
    prompt, completion = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
    model = _model(row)
    return {
        "task": {"path": task.path, "name": task.name, "categories": list(task.categories),
                 "competition": {"task_author": task.organization, "competition_name": task.competition},
                 "easy_prompt": task.easy_prompt, "challenging_prompt": task.hard_prompt,
                 "difficulty": task.difficulty, "subtasks": subtasks},
        "task_run_input": {
            "task_run_config": {"max_input_tokens_per_iteration": None, "run_with_subtasks": guided,
                                "use_easy_prompt": False, "start_time_in_ms": 0,
                                "subtask_config": {"tasks": subtasks, "iteration_config": iteration_config}},
            "agent_config": {"deployment_name": model}, "task_dir": task.path},
        "subtask_completions": completions,
        "num_subtasks": len(subtasks),
        "num_correct_subtasks": sum(c["score"] > 0 for c in completions.values()),
        "usage": {"input_tokens_used": prompt, "output_tokens_used": completion, "total_tokens": prompt + completion,
                  "iterations_used": sum(len(c["iterations"]) for c in completions.values())},
        "time_taken_in_ms": float(row.get("latency_seconds") or 0.0) * 1000,
        "status": "complete",
    }


def _task_list(data_dir: Path, split: str) -> list[str]:
    try:
        return read_task_list(data_dir, split)  # type: ignore[arg-type]
    except (OSError, ValueError):
        return []


def export_results(inputs: list[Path], out_dir: Path, data_dir: Path) -> dict[str, int]:
    """Write upstream's `logs/` layout under `out_dir` from the CyBench rows of `inputs`; returns counts."""
    counts = {"logs": 0, "skipped": 0}
    traces = TraceCheck()  # finds each row's trace as eval does
    tasks: dict[str, CybenchTask] = {}
    paths = {task_id_for(p): p for split in ("unguided", "guided") for p in _task_list(data_dir, split)}
    for path in inputs:
        for row in iter_rows(path):
            if row.get("benchmark") != "cybench":
                continue
            if not upstream_logged(row):
                counts["skipped"] += 1
                continue
            rel = str((row.get("metadata") or {}).get("task_path") or paths.get(str(row.get("task_id")), ""))
            if rel not in tasks:
                try:
                    tasks[rel] = load_task(data_dir, rel)
                except (OSError, ValueError) as exc:
                    raise BenchmarkUsageError(f"{path}: task {row.get('task_id')}: its data ({rel}) is not under "
                                              f"{data_dir} ({exc}); set QITOS_DATA_DIR") from None
            log = run_log(row, tasks[rel], _commands(row_run_dir(row, Path(path), traces)))
            name, model = _part(tasks[rel].name), _part(_model(row))
            label = "success" if log["num_correct_subtasks"] > 0 else "fail"
            subtask = "_subtask" if log["task_run_input"]["task_run_config"]["run_with_subtasks"] else ""
            folder = out_dir / name / model / f"qitos_trial{int(row.get('trial') or 0)}"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{model}_{label}{subtask}_{name}{LOG_SUFFIX}").write_text(
                redact_text(json.dumps(log, indent=4)), encoding="utf-8")
            counts["logs"] += 1
    return counts


def import_results(root: Path, output: Path, trace_logdir: Path) -> list[BenchmarkRunResult]:
    """Append one row (and write one trace) per run log under `root` (upstream's `logs/` or any folder in it)."""
    root = Path(root)
    if not root.is_dir():
        raise BenchmarkUsageError(f"{root}: not a folder; give upstream's logs folder "
                                  f"(<task>/<model>/<benchmark id>/*{LOG_SUFFIX})")
    files = sorted(root.rglob(f"*{LOG_SUFFIX}"))
    if not files:
        raise BenchmarkUsageError(f"{root}: no *{LOG_SUFFIX} files below it; expected upstream CyBench's logs")
    logs = []
    for file in files:
        try:
            log = json.loads(file.read_text(encoding="utf-8"))
            log.setdefault("task", log.get("challenge"))  # older logs say challenge / challenge_run_input
            log["task"]["path"], log["task"]["subtasks"], log["subtask_completions"].items()
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BenchmarkUsageError(f"{file}: not an upstream CyBench run log ({exc!r}); expected "
                                      "task.path, task.subtasks and subtask_completions") from None
        logs.append((file, log))
    results = ResultsFile(Path(output))
    rows: list[BenchmarkRunResult] = []
    for file, log in logs:
        row = _row(file, log, root, Path(trace_logdir), trial=sum(r.task_id == _task_id(log) for r in rows))
        results.append(row)
        rows.append(row)
    return rows


def _task_id(log: dict[str, Any]) -> str:
    path = str(log["task"]["path"])
    return task_id_for("benchmark/" + path.split("benchmark/", 1)[1] if "benchmark/" in path else path)


def _row(file: Path, log: dict[str, Any], root: Path, trace_logdir: Path, trial: int) -> BenchmarkRunResult:
    """One log as a row; `trial` numbers the logs of one task (upstream has one per run)."""
    task = log["task"]
    run_input = log.get("task_run_input") or log.get("challenge_run_input") or {}
    guided = bool((run_input.get("task_run_config") or {}).get("run_with_subtasks"))
    split = "guided" if guided else "unguided"
    deployment = str((run_input.get("agent_config") or {}).get("deployment_name") or "unknown")
    model = f"imported:{deployment}"
    path = str(task["path"])
    tid = _task_id(log)
    subtasks, commands, events = [], [], []
    completions = list(log["subtask_completions"].values())
    for index, completion in enumerate(completions):
        question = task["subtasks"][index] if index < len(task["subtasks"]) else {}
        prediction, count = None, 0
        for iteration in completion.get("iterations") or []:
            out = iteration.get("execution_output") or {}
            command = out.get("command") or {}
            if command.get("command_type") in ("answer", 1):
                prediction = out.get("stdout")
            else:
                count += 1
                events.append({"subtask": index, "command": command.get("command_str"), "output": out.get("stdout")})
        subtasks.append({"index": index, "question": question.get("question"), "prediction": prediction,
                         "correct": completion.get("score") == 1, "outcome": completion.get("completion_status"),
                         "iterations": len(completion.get("iterations") or []), "commands": count,
                         "revealed": False})
        commands.extend(events)
        events = []
    last = completions[-1] if completions else {}
    outputs = [(i.get("execution_output") or {}).get("stdout") for i in last.get("iterations") or []
               if i.get("execution_output")]
    flag = str(task["subtasks"][-1].get("answer") or "") if task["subtasks"] else ""
    success = bool(subtasks) and subtasks[-1]["correct"]
    subtask_score = sum(s["correct"] for s in subtasks) / len(subtasks) if subtasks else 0.0
    metadata: dict[str, Any] = {
        "split": split, "categories": [str(c) for c in task.get("categories") or []],
        "category": str((task.get("categories") or [None])[0]) if task.get("categories") else None,
        "difficulty": task.get("difficulty"), "subtasks": subtasks, "task_path": path,
        "partial_credit": success or upstream_flag_seen(flag, outputs),
        "upstream_flag_seen": upstream_flag_seen(flag, outputs), "imported_log": str(file),
    }
    if guided:
        metadata.update(subtask_score=subtask_score, guided_final_score=float(success))
    spec = RunSpec(model_name=model, model_family="imported", benchmark_name="cybench", benchmark_split=split,
                   prompt_protocol="cybench upstream run_task.py (imported)",
                   metadata={"imported_from": str(root), "deployment_name": deployment})
    writer = TraceWriter(trace_logdir, new_run_id("cybench-import", tid, trial), fsync="never")
    writer.update(model_id=model, model_family="imported", benchmark_name="cybench", benchmark_split=split,
                  prompt_protocol=spec.prompt_protocol,
                  run_spec={**spec.model_dump(mode="json"), "fingerprint": spec.fingerprint()},
                  task={"id": tid, "objective": f"CyBench {task.get('name') or path} (imported)",
                        "metadata": {"benchmark": "cybench", "split": split}})
    writer.write_manifest()
    for payload in commands:
        writer.event("cybench_command", "ACT", payload, step_id=None)
    for s in subtasks:
        writer.event("cybench_submission", "ACT", {"subtask": s["index"], "outcome": s["outcome"],
                                                   "answer": s["prediction"], "commands": s["commands"]}, step_id=None)
    steps = sum(s["iterations"] for s in subtasks)
    writer.finalize("completed", RunSummary(stop_reason="env_terminal", steps=steps),
                    evaluation={"success": success, "score": subtask_score if guided else float(success)})
    usage = log.get("usage") or {}
    return BenchmarkRunResult(
        task_id=tid, benchmark="cybench", split=split, trial=trial, model=model, success=success,
        score=subtask_score if guided else float(success), prediction=subtasks[-1]["prediction"] if subtasks else None,
        stop_reason="env_terminal", steps=steps, latency_seconds=float(log.get("time_taken_in_ms") or 0) / 1000,
        token_usage={"prompt_tokens": int(usage.get("input_tokens_used") or 0),
                     "completion_tokens": int(usage.get("output_tokens_used") or 0),
                     "total_tokens": int(usage.get("total_tokens") or 0)},
        trace_run_dir=str(writer.run_dir), run_spec_ref=spec.fingerprint(), metadata=metadata)
