"""Agent side: the OSWorld desktop as the agent's process reaches it, the VM's in-VM controller over HTTP.

As in upstream, the agent acts on the VM directly: each computer_13 action becomes a command sent to the VM's
controller, and each observation is the controller's screenshot and accessibility tree. That is all this side
gets: the task's id, the controller's URL, the observation settings and upstream's PromptAgent texts (read from
the data dir by the scoring side, `prompt_texts.py`) (`adapter.agent_env`). The task file's
setup steps and evaluator (metrics, expected values, gold-file URLs, postconfig), the downloads cache, upstream's
evaluators and the scoring side's own controller client stay on the scoring side (`adapter.py`,
`evaluator.py`, `upstream.py`), which scores the VM after the episode.

`build(workdir=..., link=..., task_id=..., controller_url=..., observation_type=..., settle_seconds=..., texts=...)` is the
`AgentEnvSpec` factory; the adapter's `prepare` builds the in-process (oracle, scripted-actions) env with it too.
The env's `final_state()` (its actions and last action) is what the scoring side reads the agent's final DONE/FAIL
from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qitos.benchmark.base import TaskRuntime
from qitos.benchmark.osworld.controller import ControllerClient
from qitos.benchmark.osworld.engine_env import ObservationType, OsworldEnv
from qitos.benchmark.osworld.provider import ControllerProvider


class AgentOsworldEnv(OsworldEnv):
    """`OsworldEnv` on a controller client of its own, closed with the episode."""

    def close(self) -> None:
        super().close()
        client = getattr(self.provider, "client", None)
        if client is not None:
            client.close()


def build(*, workdir: Path, link: Any = None, task_id: str, controller_url: str,
          observation_type: ObservationType = "screenshot_a11y_tree", settle_seconds: float = 1.0,
          timeout: float = 60.0, texts: dict[str, Any] | None = None) -> TaskRuntime:
    """The agent side's runtime for one OSWorld task: the env acting on the VM behind `controller_url`."""
    provider = ControllerProvider(ControllerClient(controller_url, timeout=timeout))
    env = AgentOsworldEnv(task_id, provider, observation_type=observation_type, settle_seconds=settle_seconds,
                          texts=texts)
    return TaskRuntime(env=env, workdir=workdir, handles={})


__all__ = ["AgentOsworldEnv", "build"]
