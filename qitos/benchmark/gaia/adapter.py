"""Scoring side: `--benchmark gaia`: the user's own GAIA copy as QitOS tasks, scored by the official rules.

Data comes from `--root` or `<data dir>/gaia`, laid out like the hub repository
(`2023/<split>/metadata.jsonl|parquet`, attachments beside it); QitOS never ships or caches
GAIA content. Task ids are the upstream `task_id`s, `--subset` is the level (1, 2, 3), the
attachment is the task's one resource, and the reference answer stays on the scoring side (the
adapter's gold book), never in the task.

Answers: the agent's final answer is read with `extract_final_answer` (text after the last
`FINAL ANSWER:`), falling back to the whole final answer when it has no marker (the
react_text_v1 parser already consumed the marker, or a tool-calling model answered plainly).
Test-split rows (answer "?") are run and exported for the leaderboard but never scored.

Sides: this module and `scorer.py` are the scoring side; `agent_env.py` (the tools over shipped copies
of the attachments) and the recipes run on the agent side.
"""

from __future__ import annotations

import hashlib
import json
import re
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.core.task import Budget, EnvSpec, Resource, Task

from qitos.benchmark.base import (BenchmarkAdapter, Evaluation, LoadOptions, Recipe, RecipeRef, Requirement, TaskRuntime,
                                  filter_tasks)
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.options import BenchmarkOptions
from qitos.benchmark.gaia.dataset import GAIA_SPLITS, GAIA_YEAR, HUB_REPO_ID, GaiaDataError, GaiaQuestion, find_split_dir, load_gaia
from qitos.benchmark.gaia.metrics import Proportion, gaia_metrics
from qitos.benchmark.gaia.scorer import extract_final_answer, score_answer

if TYPE_CHECKING:
    from qitos.core.engine import RunResult

__all__ = ["GaiaAdapter", "gaia_root", "parse_levels", "missing_data_message"]

_LEVEL = re.compile(r"^(?:2023_)?(?:level[ _-]?)?([123])$", re.IGNORECASE)
_ALL_LEVELS = ("all", "2023_all")


def gaia_root(load: LoadOptions) -> Path:
    """`--root` when given, else `<data dir>/gaia`."""
    return Path(load.root).expanduser() if load.root is not None else Path(load.data_dir).expanduser() / "gaia"


def missing_data_message(root: Path, split: str | None = None) -> str:
    """How to get a GAIA copy: where to put it, or how to download it with one's own HF token."""
    layout = f"{GAIA_YEAR}/{split or '<split>'}/metadata.jsonl or metadata.parquet, attachments beside it"
    return (
        f"no GAIA copy found at {root}. GAIA is gated and QitOS does not ship it: put your own copy there, laid out "
        f"like the hub repository ({layout}), or pass --root <your copy>; or download it with your Hugging Face "
        f"token: accept the terms at "
        f"https://huggingface.co/datasets/{HUB_REPO_ID}, export HF_TOKEN=<token>, then run "
        f"`python -m qitos.benchmark.gaia.fetch --target {root}`"
    )


def parse_levels(subset: str | None) -> set[int] | None:
    """`--subset`: None/all → every level; `1`, `level2`, `2023_level3`, or a comma list of them."""
    if subset is None or subset.strip().lower() in _ALL_LEVELS:
        return None
    levels: set[int] = set()
    for part in subset.split(","):
        match = _LEVEL.match(part.strip())
        if not match:
            raise BenchmarkUsageError(f"--subset '{subset}': GAIA subsets are levels; use 1, 2, 3 (or e.g. 1,2, all)")
        levels.add(int(match.group(1)))
    return levels


def _split(load: LoadOptions) -> str:
    split = load.split or GaiaAdapter.default_split
    if split not in GAIA_SPLITS:
        raise BenchmarkUsageError(f"--split '{split}': GAIA has the splits {', '.join(GAIA_SPLITS)}")
    return split


def _questions(load: LoadOptions, split: str, levels: set[int] | None) -> list[GaiaQuestion]:
    root = gaia_root(load)
    try:
        find_split_dir(root, split)
    except GaiaDataError:
        raise BenchmarkUsageError(missing_data_message(root, split)) from None
    try:
        return load_gaia(root, split, levels=levels)
    except GaiaDataError as exc:
        raise BenchmarkUsageError(f"{exc} (fix the copy at {root} or point --root elsewhere)") from None


def question_to_task(question: GaiaQuestion) -> Task:
    resources = []
    if question.file_path is not None:
        resources.append(Resource(kind="file", path=str(question.file_path.resolve()),
                                  description=f"GAIA attachment {question.file_name}"))
    return Task(
        id=question.task_id,
        objective=question.question,
        inputs={"file_name": question.file_name} if question.file_name else {},
        resources=resources,
        env_spec=EnvSpec(type="gaia-workdir", capabilities=["files", "python", "web"]),
        success_criteria=["the FINAL ANSWER matches the reference under GAIA's quasi-exact match"],
        metadata={"benchmark": "gaia", "split": question.split, "level": question.level,
                  "labeled": question.labeled, "file_name": question.file_name},
    )


@lru_cache(maxsize=512)
def _file_sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def copy_digest(questions: list[GaiaQuestion]) -> str:
    """16 hex over the content of a split (every field of each question, attachment bytes), not its location."""
    h = hashlib.sha256()
    for q in sorted(questions, key=lambda q: q.task_id):
        attachment = None
        if q.file_path is not None and q.file_path.is_file():
            stat = q.file_path.stat()
            attachment = _file_sha256(str(q.file_path), stat.st_size, stat.st_mtime_ns)
        h.update(json.dumps([q.task_id, q.question, q.level, q.final_answer, q.file_name, attachment]).encode())
        if q.annotator_metadata:  # the reference steps and tools too (left out of older digests when absent)
            h.update(json.dumps(q.annotator_metadata, sort_keys=True, default=str).encode())
    return h.hexdigest()[:16]


def _proportion(p: Proportion) -> dict[str, Any]:
    ci = None if p.ci_low is None or p.ci_high is None else [round(p.ci_low, 4), round(p.ci_high, 4)]
    accuracy = None if p.accuracy is None else round(p.accuracy, 4)
    return {"accuracy": accuracy, "correct": p.correct, "total": p.total, "ci95": ci}


class GaiaAdapter(BenchmarkAdapter):
    name = "gaia"
    description = "GAIA general-assistant questions (your own copy), quasi-exact match by level"
    default_split = "validation"
    default_recipe = "react"
    split_sides = True  # the agent and its tools on the agent side (agent_env.py), the answer scored here
    scorer_official = True
    scorer_note = "GAIA's published quasi-exact-match rules (question_scorer), ported case by case"
    options_model = BenchmarkOptions  # no --option keys
    variants = ()

    # -- discovery -----------------------------------------------------------------------------
    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        root = gaia_root(load)
        counts: dict[str, int | None] = {}
        for split in GAIA_SPLITS:
            try:
                counts[split] = len(load_gaia(root, split, require_files=False))
            except GaiaDataError:
                counts[split] = None
        return counts

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        from qitos.benchmark.gaia.runtime import python_requirement, web_requirement

        root = gaia_root(load)
        found = []
        for split in GAIA_SPLITS:
            try:
                found.append(f"{split} at {find_split_dir(root, split)}")
            except GaiaDataError:
                pass
        data = (Requirement(name="GAIA data", ok=True, detail="; ".join(found)) if found
                else Requirement(name="GAIA data", ok=False, detail=missing_data_message(root)))
        return [data, python_requirement(), web_requirement()]

    def recipes(self) -> dict[str, Recipe]:
        return {
            "react": Recipe("react", RecipeRef("qitos.recipes.gaia:build_react_agent"),
                            "ReAct text agent (react_text_v1) with the GAIA prompt and tools; ends with FINAL ANSWER"),
            "tool-calling": Recipe("tool-calling", RecipeRef("qitos.recipes.gaia:build_tool_calling_agent"),
                                   "native tool calling (native_tools_v1) with the GAIA prompt and tools"),
            "oracle": Recipe("oracle", RecipeRef("qitos.recipes.gaia:build_oracle_agent"), "answers the reference answer (validates your copy and "
                             "the scoring; not a baseline); no model calls", official=False, needs_model=False),
        }

    # -- tasks -----------------------------------------------------------------------------------
    def load_tasks(self, load: LoadOptions) -> list[Task]:
        from qitos.benchmark.gaia.runtime import web_config

        try:
            web_config()
        except ValueError as exc:
            raise BenchmarkUsageError(str(exc)) from None
        questions = _questions(load, _split(load), parse_levels(load.subset))
        for q in questions:
            if q.labeled:
                self.golds.keep(q.task_id, q.final_answer)
        return filter_tasks([question_to_task(q) for q in questions], load)

    def dataset_digest(self, load: LoadOptions, tasks: list[Task]) -> str:
        """Digest of the whole split of the user's copy, so that `--task-ids`/`--limit` runs of the same
        copy share a RunSpec and can append to one results file (the selection is in the ExperimentSpec)."""
        return copy_digest(_questions(load, _split(load), None))

    def default_budget(self) -> Budget:
        return Budget(max_steps=30)

    # -- one task ----------------------------------------------------------------------------------
    # -- agent side (see agent_env.py): the tools run there, over shipped copies of the attachments --
    def agent_handles(self, task: Task, runtime: TaskRuntime) -> dict[str, Any]:
        return {}

    def agent_env(self, task: Task, runtime: TaskRuntime):
        from qitos.benchmark.contract import AgentEnvSpec
        from qitos.benchmark.gaia.runtime import web_config

        web = web_config()
        return AgentEnvSpec(factory="qitos.benchmark.gaia.agent_env:build", kwargs={
            "attachments": [Path(r.path).name for r in task.resources if r.kind == "file"],
            "web": None if web is None else {**web.model_dump(mode="json"),
                                            "api_key": web.api_key.get_secret_value() if web.api_key else None}})

    def agent_network(self, load: LoadOptions) -> bool:
        from qitos.benchmark.gaia.runtime import web_config

        try:
            return web_config() is not None
        except ValueError:
            return False

    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        from qitos.benchmark.gaia.runtime import build_runtime, web_config

        return build_runtime(task, workdir, web_config())  # in one process (oracles)

    def prepare_scoring_side(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        return TaskRuntime(workdir=workdir)  # the tools are built on the agent side

    def cleanup(self, runtime: TaskRuntime) -> None:
        from qitos.benchmark.gaia.runtime import close_runtime

        close_runtime(runtime)

    def evaluate(self, task: Task, result: "RunResult", runtime: TaskRuntime) -> Evaluation:
        final = result.final_answer
        extracted = extract_final_answer(final)
        if extracted is not None:
            prediction, source = extracted, "final_answer_marker"
        elif final is not None:
            prediction, source = final.strip(), "whole_final_answer"
        else:
            prediction, source = None, "no_answer"
        meta: dict[str, Any] = {"level": task.metadata.get("level"), "answer_source": source}
        if final is not None and prediction != final:
            meta["raw_final_answer"] = final
        truth = self.golds.get(task.id) if task.id in self.golds else None
        if truth is None:
            return Evaluation(success=None, score=None, prediction=prediction, metadata={**meta, "labeled": False})
        ok = score_answer(prediction, truth)
        return Evaluation(success=ok, score=1.0 if ok else 0.0, prediction=prediction, metadata={**meta, "labeled": True})

    def do_nothing_success(self, task: Task, load: LoadOptions) -> bool | None:
        """Does no answer match the ground truth under GAIA's scorer (`floor.py`)? None for unlabeled tasks."""
        from qitos.benchmark.gaia.floor import do_nothing_success

        return do_nothing_success(self.golds.get(task.id) if task.id in self.golds else None)

    # -- aggregation ----------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Accuracy over every labeled row (unscored ones count as wrong), overall and per level, with 95%
        Wilson intervals and the coverage; unlabeled rows apart."""
        m = gaia_metrics(rows)
        out: dict[str, Any] = {"accuracy": _proportion(m.overall),
                               "coverage": round(m.scored / m.overall.total, 4) if m.overall.total else None}
        for level, proportion in m.by_level.items():
            out[f"level_{level}"] = _proportion(proportion)
        out["unlabeled"] = m.unlabeled
        out["errors"] = m.errors
        return out

    def export_results(self, fmt: str, rows: list[dict[str, Any]], paths: list[Path]) -> str:
        """`--format gaia-submission`: the leaderboard's JSON lines, one agent's answer per task."""
        if fmt != "gaia-submission":
            return super().export_results(fmt, rows, paths)
        from qitos.benchmark.gaia.submission import submission_text

        return submission_text(rows)
