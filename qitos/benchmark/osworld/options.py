"""Both sides (the `prompt-agent` recipe reads them on the agent side): OSWorld's `--option` keys, declared (see
`qitos.benchmark.options`): upstream's run flags, named and defaulted as `run.py` names them (`action_space`,
`observation_type`, `sleep_after_execution`, `max_trajectory_length`, `temperature`, `top_p`, `max_tokens`) plus
PromptAgent's `a11y_tree_max_tokens`, which the `prompt-agent` recipe follows
(`qitos/recipes/osworld_prompt_agent.py`); the desktop provider and its Docker VM settings (`docker_provider.py`); and
the `react-computer-use` recipe's own (`qitos/recipes/osworld.py`). Upstream's `--max_steps` (15) is the run's
`--max-steps` (one step = one model call = one `predict`)."""

from __future__ import annotations

from typing import Literal

from pydantic import model_validator

from qitos.benchmark.options import BenchmarkOptions, option
from qitos.benchmark.osworld.engine_env import OBSERVATION_TYPES

DEFAULT_IMAGE = "happysixd/osworld-docker"  # upstream's Docker provider image (QEMU running the VM disk image)
SIZE = r"^[1-9][0-9]*[KMGT]?$"


class OsworldOptions(BenchmarkOptions):
    action_space: Literal["pyautogui", "computer_13"] = option(
        "pyautogui", "prompt-agent: what the model sends, pyautogui code or computer_13 actions "
        "(react-computer-use always sends computer_13)")
    observation_type: Literal[OBSERVATION_TYPES] = option(  # type: ignore[valid-type]
        "a11y_tree", "what the agent sees after each action (som: a tagged screenshot, prompt-agent with pyautogui)")
    sleep_after_execution: float = option(0.0, "seconds to wait after an action before the next observation", ge=0)
    max_trajectory_length: int = option(3, "prompt-agent: earlier observations and replies kept in the prompt", ge=0)
    a11y_tree_max_tokens: int = option(10000, "prompt-agent: gpt-4 tokens of the accessibility tree shown", ge=1)
    temperature: float = option(1.0, "prompt-agent: sampling temperature sent", ge=0)
    top_p: float = option(0.9, "prompt-agent: top_p sent", gt=0, le=1)
    max_tokens: int = option(1500, "prompt-agent: max_tokens sent", ge=1)
    provider: Literal["controller", "docker"] = option(
        "controller", "controller: the VMs of $QITOS_OSWORLD_CONTROLLER; docker: one VM container per task in flight")
    vm_image: str | None = option(None, "docker: the OSWorld VM disk image (default <data dir>/osworld-vm/Ubuntu.qcow2)")
    docker_image: str = option(DEFAULT_IMAGE, "docker: the image that runs the VM")
    vm_ram: str = option("4G", "docker: the VM's memory", range="a size such as 4G", pattern=SIZE)
    vm_cpus: int = option(4, "docker: the VM's cores", ge=1)
    vm_disk: str = option("32G", "docker: the VM's disk size", range="a size such as 32G", pattern=SIZE)
    vm_start_timeout: float = option(600.0, "docker: seconds a VM may take to boot", gt=0)
    history: int = option(3, "react-computer-use: observations kept in full (older ones become a note)", ge=1)
    a11y_max_chars: int = option(12000, "react-computer-use: characters of the accessibility tree shown", ge=200)

    @model_validator(mode="after")
    def _som_takes_code(self) -> "OsworldOptions":
        if self.observation_type == "som" and self.action_space == "computer_13":
            raise ValueError("--option observation_type=som goes with action_space=pyautogui (upstream's PromptAgent "
                             "has no set-of-marks prompt for computer_13)")
        return self
