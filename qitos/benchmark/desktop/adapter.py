"""Scoring side: `--benchmark desktop-starter` (alias `desktop`), the desktop starter tasks through the runner.

The two sides: `adapter.py`, `service.py`, `engine_env.py`, `env.py`, `display.py`, `gold.py` (the checkers,
expected values, targets and reference plans), `failures.py` and `apps/` run on the scoring side: `prepare` starts the desktop and the app there,
`serve` answers the agent's calls (`service.DesktopService`) and `evaluate` runs the task's checker on the app's
state as this side reads it. `agent_env.py` is the agent side: a `RemoteDesktop` that acts and observes only
through the link (`agent_env` describes it; the recipes in `qitos/recipes/computer_use.py` drive it). An oracle
runs in this process on the same `RemoteDesktop`, its link calling `serve` directly.

Gold: this module is imported on the agent side too (`get_adapter("desktop-starter").recipes()`, the agent
host's warm-up), so it imports only the public task cards (`tasks.CARDS`: id, instruction, app, setup, budget) at
module level; `gold.py` is imported inside the methods that run only on the scoring side (`load_tasks`, `prepare`,
`scoring_side_sources`), and `scoring_side_sources` hands its file to the agent host, which masks it.

One split, `starter` (every task of `tasks.CARDS`). Each task × trial gets its own virtual desktop, started in
`prepare` and always torn down (by the engine's `close()` when the run ends, by `cleanup` on every path).
Success is the task checker's verdict on the app's real state (score 1/0); a failed run carries its failure tag
(see `failures.py`), and `metrics()` adds the success rate and the failure taxonomy counts.

Step budget: each task has its own (`TaskCard.max_steps`). The runner gives every task the batch budget
(`default_budget()`, or `--max-steps`), so the desktop enforces the smaller of the two: the episode ends
(stop reason `env_terminal`) when the task's own budget is spent.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from qitos.core.task import Budget, EnvSpec, Task

from qitos.benchmark.base import (BenchmarkAdapter, Evaluation, LoadOptions, Recipe, RecipeRef, Requirement, TaskRuntime,
                                  filter_tasks)
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.options import BenchmarkOptions, option
from qitos.benchmark.contract import AgentCallRefused, AgentEnvSpec
from qitos.benchmark.desktop import agent_env
from qitos.benchmark.desktop.display import DesktopUnavailable, requirements
from qitos.benchmark.desktop.engine_env import DesktopEngineEnv
from qitos.benchmark.desktop.failures import FAILURE_TAGS
from qitos.benchmark.desktop.service import DesktopService, DirectLink, RefusingLink
from qitos.benchmark.desktop.tasks import CARDS, TaskCard, get_card

if TYPE_CHECKING:
    from qitos.core.engine import RunResult

SPLIT = "starter"
SCREEN = (1024, 768)
SUCCESS_CRITERIA = [
    "the application's own recorded state (or the file it saved) shows the instruction was carried out",
    "the agent ends with DONE when finished, or with FAIL when the task cannot be done in the application",
]


def to_task(desktop_task: TaskCard) -> Task:
    """The platform Task of one desktop task, from its public card: feasibility and targets are not on it."""
    return Task(
        id=desktop_task.id,
        objective=desktop_task.instruction,
        env_spec=EnvSpec(type="desktop", config={"app": desktop_task.app, "app_config": desktop_task.config,
                                                 "screen": f"{SCREEN[0]}x{SCREEN[1]}"},
                         capabilities=["screenshot", "widget_text", "computer_13"]),
        success_criteria=list(SUCCESS_CRITERIA),
        budget=Budget(max_steps=desktop_task.max_steps),
        metadata={"benchmark": "desktop-starter", "split": SPLIT, "app": desktop_task.app,
                  "max_steps": desktop_task.max_steps},
    )


class DesktopOptions(BenchmarkOptions):
    """The `--option` keys of desktop-starter (its react-computer-use recipe's)."""

    vision: bool = option(False, "react-computer-use: attach each screenshot as an image (multimodal models)")


@dataclass
class DesktopRuntime(TaskRuntime):
    """The runtime of one desktop task; `service` (the desktop, scoring side) is None for a probe."""

    service: DesktopService | None = None


class DesktopAdapter(BenchmarkAdapter):
    name = "desktop-starter"
    description = "Desktop starter: computer-use tasks on a real X desktop (Xvfb + openbox + Tk apps), no VM"
    default_split = SPLIT
    default_recipe = "react-computer-use"
    deterministic_env = False
    scorer_official = True
    scorer_note = "QitOS's own starter benchmark: its checkers read the apps' real state and are the reference"
    split_sides = True
    scoring_event_kinds = ("env_step",)  # the step records (service.py): the receiver drops the agent's own
    options_model = DesktopOptions
    variants = ()

    # -- discovery ---------------------------------------------------------------------------------------
    def splits(self, load: LoadOptions) -> dict[str, int | None]:
        return {SPLIT: len(CARDS)}

    def requirements(self, load: LoadOptions) -> list[Requirement]:
        """One entry per missing program (detail names the apt package), or one `ok` entry."""
        missing = requirements()
        if not missing:
            return [Requirement(name="X desktop", ok=True,
                                detail="Xvfb, openbox, xdotool, x11-utils, tkinter and a screenshot tool found")]
        return [Requirement(name=item.split(" (")[0], ok=False, detail=item) for item in missing]

    def recipes(self) -> dict[str, Recipe]:
        return {
            "react-computer-use": Recipe(
                "react-computer-use", RecipeRef("qitos.recipes.computer_use:build_react_computer_use"),
                "one computer_13 action per step as JSON, from the instruction, widget text and screenshot "
                "(attached as an image with --option vision=1)"),
            "oracle": Recipe("oracle", RecipeRef("qitos.recipes.computer_use:build_oracle_agent"), "plays each task's reference actions (no model)",
                             official=False, needs_model=False),
        }

    # -- tasks ---------------------------------------------------------------------------------------------
    def load_tasks(self, load: LoadOptions) -> list[Task]:
        split = load.split or SPLIT
        if split != SPLIT:
            raise BenchmarkUsageError(f"benchmark 'desktop-starter' has no split '{split}'; use --split {SPLIT}")
        if load.subset:
            raise BenchmarkUsageError("benchmark 'desktop-starter' has no subsets; select tasks with --task-ids "
                                      f"(ids: {', '.join(CARDS)})")
        from qitos.benchmark.desktop.gold import TASKS  # scoring side only (see the module docstring)

        for desktop_task in TASKS.values():
            self.golds.keep(desktop_task.id, desktop_task)
        return filter_tasks([to_task(t) for t in CARDS.values()], load)

    def default_budget(self) -> Budget:
        return Budget(max_steps=max(t.max_steps for t in CARDS.values()))

    # -- one task ----------------------------------------------------------------------------------------------
    def prepare(self, task: Task, trial: int, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """Start the task's desktop and app here (scoring side); `runtime.env` is the agent side's view of it,
        linked straight to `serve` for runs in this process (oracles)."""
        missing = requirements()
        if missing:
            return TaskRuntime(workdir=workdir, unavailable="desktop tasks need: " + "; ".join(missing))
        from qitos.benchmark.desktop.gold import get_task  # scoring side only

        desktop_task = get_task(task.id)
        batch_steps = task.budget.max_steps
        if batch_steps is not None and batch_steps < desktop_task.max_steps:
            desktop_task = desktop_task.model_copy(update={"max_steps": batch_steps})
        try:
            desktop = DesktopEngineEnv.launch(desktop_task, workdir / "desktop", width=SCREEN[0], height=SCREEN[1])
        except DesktopUnavailable as exc:
            return TaskRuntime(workdir=workdir, unavailable=str(exc))
        runtime = DesktopRuntime(workdir=workdir, handles={"desktop_task": desktop_task.id})
        runtime.service = DesktopService(desktop, lambda: runtime.trace_event)
        agent = agent_env.build(workdir=workdir / "agent", link=DirectLink(self, task, runtime),
                                **self._agent_kwargs(task, runtime))
        runtime.env = agent.env
        return runtime

    def probe_runtime(self, task: Task, load: LoadOptions, workdir: Path) -> TaskRuntime:
        """Enough to build the agent (for the RunSpec): no desktop is started."""
        missing = requirements()
        if missing:
            return TaskRuntime(workdir=workdir, unavailable="desktop tasks need: " + "; ".join(missing))
        runtime = DesktopRuntime(workdir=workdir, handles={"desktop_task": task.id})
        runtime.env = agent_env.build(workdir=workdir / "agent", link=RefusingLink(),
                                      **self._agent_kwargs(task, runtime)).env
        return runtime

    @staticmethod
    def _agent_kwargs(task: Task, runtime: TaskRuntime) -> dict[str, Any]:
        service = getattr(runtime, "service", None)
        if service is not None:
            max_steps = service.max_steps
        else:
            own = get_card(task.id).max_steps
            max_steps = min(own, task.budget.max_steps or own)
        return {"task_id": task.id, "max_steps": max_steps}

    # -- the agent side's view ---------------------------------------------------------------------------------
    def agent_env(self, task: Task, runtime: TaskRuntime) -> AgentEnvSpec:
        """The agent side's `RemoteDesktop`: the task id and its step budget, nothing else (no display, no paths)."""
        return AgentEnvSpec(factory="qitos.benchmark.desktop.agent_env:build", kwargs=self._agent_kwargs(task, runtime))

    def agent_files(self, task: Task, runtime: TaskRuntime) -> dict[str, str]:
        return {}  # the app's files stay with the app, on the scoring side

    def agent_handles(self, task: Task, runtime: TaskRuntime) -> dict[str, Any]:
        return {}

    def scoring_side_sources(self) -> list[str]:
        """`gold.py`, the checkers, expected values, targets and reference plans: the agent host masks it and its
        bytecode. Imported here first (scoring side), so its bytecode is on disk, and masked, before the host starts."""
        from qitos.benchmark.desktop import gold

        return [str(Path(gold.__file__).resolve())]

    def serve(self, task: Task, runtime: TaskRuntime, method: str, payload: dict[str, Any]) -> Any:
        service = getattr(runtime, "service", None)
        if service is None:
            raise AgentCallRefused(f"task '{task.id}' has no desktop running (method '{method}')")
        return service.handle(method, payload)

    def evaluate(self, task: Task, result: "RunResult", runtime: TaskRuntime) -> Evaluation:
        """The checker on the app's state as this side reads it (never on what the agent side returned)."""
        service = getattr(runtime, "service", None)
        if service is None:
            raise RuntimeError(f"task '{task.id}' has no desktop to score (it was never started)")
        env = service.env
        outcome = env.finish()
        last_record = next((r for r in reversed(env.env.records) if r.kind == "action"), None)
        return Evaluation(
            success=outcome.success, score=1.0 if outcome.success else 0.0, prediction=outcome.last_action,
            metadata={"failure_tag": outcome.failure_tag, "detail": outcome.detail,
                      "last_action": outcome.last_action,
                      "last_action_detail": last_record.action if last_record else None,
                      "evidence": outcome.evidence, "env_steps": outcome.steps, "app": env.task.app,
                      "max_steps": env.task.max_steps})

    def do_nothing_success(self, task: Task, load: LoadOptions) -> bool | None:
        """1 for an agent that answers FAIL at once: the infeasible tasks (`floor.py`)."""
        from qitos.benchmark.desktop.floor import do_nothing_success

        return do_nothing_success(self.gold(task))

    def cleanup(self, runtime: TaskRuntime) -> None:
        service = getattr(runtime, "service", None)
        if service is not None:
            service.env.close()

    # -- aggregation -------------------------------------------------------------------------------------------
    def metrics(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """Success rate over every row (unscored rows count as failures), coverage, the rate over scored
        rows, and how many failures fell under each failure tag."""
        scored = [r for r in rows if r.get("success") is not None]
        successes = sum(1 for r in scored if r["success"])
        tags = Counter((r.get("metadata") or {}).get("failure_tag") for r in scored if not r["success"])
        unscored = Counter(r.get("stop_reason") for r in rows if r.get("success") is None)
        return {
            "success_rate": successes / len(rows) if rows else None,
            "coverage": len(scored) / len(rows) if rows else None,
            "scored_success_rate": successes / len(scored) if scored else None,
            "successes": successes,
            "scored": len(scored),
            "failure_taxonomy": {tag: tags.get(tag, 0) for tag in FAILURE_TAGS},
            "untagged_failures": tags.get(None, 0),
            "not_scored": dict(unscored),
        }
