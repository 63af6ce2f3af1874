"""Scoring side. A finished run's `Evaluation`: the answers the scoring side recorded (`episode.py`), plus the
run's final answer for an agent that ended without submitting, scored by upstream's rule (`scoring.py`) with
partial credit from the model's replies in the trace. `qit bench eval` scores a claimed success again from what
the manifest recorded (`rescore`), with the same rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.benchmark.base import Evaluation, TaskRuntime
from qitos.benchmark.cybench.episode import CybenchEpisode
from qitos.benchmark.cybench.metrics import upstream_flag_seen
from qitos.benchmark.cybench.scoring import extract_answer, score_task
from qitos.benchmark.cybench.tasks import CybenchTask, Split

if TYPE_CHECKING:
    from qitos.core.engine import RunResult


def evaluate(record: CybenchTask, result: RunResult, runtime: TaskRuntime) -> Evaluation:
    """Scores from the scoring side's record of submissions (`episode`), plus the run's final answer for an agent
    that ended without submitting; the agent's final state only reports its iteration counts."""
    episode: CybenchEpisode = runtime.handles["episode"]
    split: Split = runtime.handles["split"]
    answers = episode.answers()
    if not episode.is_terminal() and answers[episode.current] is None and result.final_answer:
        # an agent that ended with a final answer instead of submit(): it answers the open question
        answers[episode.current] = extract_answer(result.final_answer) or result.final_answer.strip()
    transcript = "\n".join([*agent_texts(result.run_dir), *(a for a in answers if a)])
    score = score_task(record, split, answers, transcript=transcript)
    reported = _reported_iterations(result.final_state, len(episode.records))
    subtasks = [
        {"index": r.index, "question": r.question, "prediction": r.prediction, "correct": r.correct,
         "outcome": q.outcome, "iterations": reported[r.index], "commands": q.commands, "revealed": q.revealed}
        for r, q in zip(score.subtasks, episode.records, strict=True)
    ]
    metadata: dict[str, Any] = {
        "split": split, "variant": runtime.handles["variant"], "categories": list(record.categories),
        "category": record.categories[0] if record.categories else None, "difficulty": record.difficulty,
        "difficulty_name": record.difficulty_name, "subtasks": subtasks, "partial_credit": score.partial,
        "missing_requirements": runtime.handles["missing_requirements"],
        "task_path": record.path,  # upstream's `task.path`: its logs and grade_benchmark.py key on it
        "upstream_flag_seen": episode.records[-1].flag_in_output
        or upstream_flag_seen(record.gold().flag, [answers[-1]]),
        "toolchain": str(runtime.handles["toolchain"]) if runtime.handles.get("toolchain") else None,
    }
    stack = runtime.handles.get("services")
    if stack is not None:
        metadata["services"] = {"network": stack.network, "hosts": stack.hosts()}
    if split == "guided":
        metadata.update(subtask_score=score.subtask_score, guided_final_score=score.final_score)
        value = score.subtask_score
    else:
        value = 1.0 if score.success else 0.0
    return Evaluation(success=score.success, score=value, prediction=answers[-1], metadata=metadata)


def rescore(record: CybenchTask, split: Split, recorded: dict[str, Any], run_dir: str) -> Evaluation:
    """`evaluate`'s score from a manifest's record: the answer given to each question (`recorded["answers"]`) and
    the trace's model replies (partial credit); ValueError when the manifest recorded no answers."""
    answers = recorded.get("answers")
    if not isinstance(answers, list):
        raise ValueError("no recorded answers")
    transcript = "\n".join([*agent_texts(run_dir), *(str(a) for a in answers if a)])
    score = score_task(record, split, answers, transcript=transcript)
    value = score.subtask_score if split == "guided" else (1.0 if score.success else 0.0)
    return Evaluation(success=score.success, score=value)


def agent_texts(run_dir: str | Path) -> list[str]:
    """The model's replies in a finished trace (for partial credit); empty when there is no trace."""
    from qitos.trace.reader import read_steps

    try:
        steps = read_steps(run_dir)
    except (OSError, ValueError):
        return []
    texts = []
    for step in steps:
        response = step.model_response if isinstance(step.model_response, dict) else None
        if response and response.get("text"):
            texts.append(str(response["text"]))
    return texts


def _reported_iterations(final_state: Any, count: int) -> list[int | None]:
    """Iterations per question as the agent side counted them (its `final_state`); None where it said nothing."""
    out: list[int | None] = [None] * count
    records = final_state.get("records") if isinstance(final_state, dict) else None
    for item in records if isinstance(records, list) else []:
        index = item.get("index") if isinstance(item, dict) else None
        value = item.get("iterations") if isinstance(item, dict) else None
        if isinstance(index, int) and 0 <= index < count and isinstance(value, int) and not isinstance(value, bool):
            out[index] = value
    return out
