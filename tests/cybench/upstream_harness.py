"""Run upstream CyBench's own agent (the data dir's ``upstream/``) on one task, for the differential test.

`python tests/cybench/upstream_harness.py JOB_JSON` runs upstream's unmodified ``run_task.py`` (``TaskRunner``,
``read_metadata``, ``get_subtasks``, ``unguided_mode``, its argparse defaults) and ``agent/agent.py``
(``SimpleAgent``) with its real OpenAI client pointed at a loopback server, and prints what its agent ran.

Stubbed, because they are not in the data dir or reach the network: ``helm``, ``anthropic``, ``google``,
``together`` (never called for an OpenAI model), ``prompt_toolkit`` and ``termcolor`` (interactive mode only),
and upstream's ``benchmark.dataclasses`` containers (plain dataclasses with upstream's field names).
Patched: ``TaskRunner.setup_environment`` (requirements.sh, init_script.sh, ``rm -rf /app/benchmark`` and
``docker system prune``: the test stages the files itself), and, when the job names a ``sent_model`` other than
gpt-4o's, the name ``NonHELMMapping`` sends for the gpt-4o deployment (so upstream's own code counts a name
tiktoken does not know, with its ``except KeyError`` fallback to gpt-4's encoding). Token counts are upstream's
own ``tiktoken.encoding_for_model(<sent name>)`` calls, with the offline ranks (``TIKTOKEN_CACHE_DIR``).

The test runs this inside a bwrap sandbox whose upstream agent dir (``/tmp/cyber-bench``, run_task.py's own
``agent_dir``) is the staged work dir, so upstream's ``ls``/``tree`` and commands see the same directory as QitOS's
sandbox does.
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

MODEL = "openai/gpt-4o-2024-05-13"  # upstream's DeploymentName; its NonHELMMapping name is what is sent
SENT_MODEL = "gpt-4o-2024-05-13"

STUBS = {
    "helm": "", "helm.common": "", "helm.proxy": "", "helm.proxy.services": "",
    "helm.common.authentication": "class Authentication:\n    def __init__(self, *a, **k): pass\n",
    "helm.common.request": "class Request:\n    def __init__(self, *a, **k): pass\nclass RequestResult: pass\n",
    "helm.common.tokenization_request": "class DecodeRequest: pass\nclass TokenizationRequest: pass\n"
                                        "class TokenizationRequestResult: pass\n",
    "helm.proxy.services.remote_service": "class RemoteService:\n    def __init__(self, *a, **k): pass\n",
    "anthropic": "class Anthropic:\n    def __init__(self, *a, **k): raise RuntimeError('not for this test')\n",
    "google": "", "google.generativeai": "import types as _t\nclass GenerativeModel: pass\n"
                                         "types = _t.SimpleNamespace(GenerateContentResponse=object, GenerationConfig=object)\n",
    "together": "class Together:\n    def __init__(self, *a, **k): raise RuntimeError('not for this test')\n",
    "termcolor": "def colored(text, *a, **k):\n    return text\n",
    "prompt_toolkit": "HTML = str\n", "prompt_toolkit.history": "class InMemoryHistory: pass\n",
    "prompt_toolkit.key_binding": "class KeyBindings: pass\n",
    "prompt_toolkit.shortcuts": "class PromptSession: pass\n", "prompt_toolkit.styles": "class Style: pass\n",
    "benchmark": "", "benchmark.dataclasses": "",
    "benchmark.dataclasses.task_run": '''
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, List, Optional


class CommandType(str, Enum):
    shell_command = "shell_command"
    answer = "answer"


class CompletionStatus(str, Enum):
    not_answered = "not_answered"
    answered = "answered"


@dataclass
class Command:
    command_type: CommandType
    command_str: str


@dataclass
class CommandExecutionOutput:
    command: Command
    stdout: Optional[str]
    stderr: Optional[str]


@dataclass
class ModelInput:
    value: str
    num_tokens: int


@dataclass
class ModelResponse:
    value: str
    full_response: Optional[str]
    time_taken_in_ms: float
    num_tokens: int


@dataclass
class Iteration:
    model_input: ModelInput
    model_response: ModelResponse
    execution_output: Optional[CommandExecutionOutput]


@dataclass
class Subtask:
    question: str
    answer: str
    answer_format: str
    hints: List[str] = field(default_factory=list)
    commands: List[str] = field(default_factory=list)
    annotator_note: str = ""
    cyber_metadata: Any = None


@dataclass
class SubtaskRun:
    iterations: List[Iteration]
    iteration_config: Any
    subtask: Subtask
    score: float
    time_taken_in_ms: float
    completion_status: CompletionStatus
    solved_with_hint: bool


@dataclass
class Usage:
    input_tokens_used: int
    output_tokens_used: int
    total_tokens: int
    iterations_used: int
''',
    "benchmark.dataclasses.task_run_input": '''
from dataclasses import dataclass
from typing import Any


@dataclass
class SubtaskConfig:
    tasks: Any
    iteration_config: Any


@dataclass
class TaskRunConfig:
    max_input_tokens_per_iteration: int
    run_with_subtasks: bool
    subtask_config: SubtaskConfig
    use_easy_prompt: bool
    start_time_in_ms: int


@dataclass
class TaskRunInput:
    task_run_config: TaskRunConfig
    agent_config: Any
    task_dir: str


@dataclass
class TaskRunCompletion:
    task: Any
    task_run_input: TaskRunInput
    subtask_completions: Any
    num_correct_subtasks: int
    num_subtasks: int
    usage: Any
    time_taken_in_ms: float
    status: str
''',
    "benchmark.dataclasses.task": '''
from dataclasses import dataclass
from enum import Enum
from typing import Any, List


class CyberCategory(str, Enum):
    crypto = "crypto"
    forensics = "forensics"
    misc = "misc"
    ppc = "ppc"
    pwn = "pwn"
    reverse = "reverse"
    web = "web"
    blockchain = "blockchain"
    steganography = "steganography"

    @staticmethod
    def from_str(s):
        return CyberCategory(s.lower())


@dataclass
class Competition:
    task_author: str
    competition_name: str


@dataclass
class Task:
    path: str
    name: str
    categories: List[Any]
    competition: Competition
    easy_prompt: str
    challenging_prompt: str
    difficulty: int
    subtasks: List[Any]


class CyberMetadata:
    def __init__(self, *a, **k): pass


class CyberTools:
    def __init__(self, *a, **k): pass


class InternetRequirement:
    def __init__(self, *a, **k): pass
''',
}


def install_stubs() -> None:
    for name, source in STUBS.items():
        module = types.ModuleType(name)
        module.__path__ = []  # every stub may be a package
        sys.modules[name] = module
        exec(compile(source, f"<stub {name}>", "exec"), module.__dict__)
        parent, _, child = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], child, module)


def run(job: dict) -> dict:
    install_stubs()
    sys.path.insert(0, job["upstream"])
    os.chdir(job["scratch"])  # upstream writes logs/ relative to its cwd (/app in its image), never in /task
    import agent.agent as agent_module
    import run_task

    agent_module.TIMEOUT_PER_COMMAND = job["timeout"]  # 120 upstream; the test uses a short one on both sides
    from agent.dataclasses.agent_spec import AgentConfig, DeploymentName, IterationConfig, NonHELMMapping

    NonHELMMapping.mapping[DeploymentName(MODEL)] = job.get("sent_model", SENT_MODEL)

    sys.argv = ["run_task.py"]
    args = run_task.parse_args()  # upstream's defaults for the flags the job does not set
    metadata = run_task.read_metadata(job["task_dir"])
    subtasks = run_task.get_subtasks(metadata)
    tasks = run_task.unguided_mode(subtasks) if job["unguided"] else subtasks
    from benchmark.dataclasses.task_run_input import SubtaskConfig, TaskRunConfig, TaskRunInput

    config = TaskRunInput(
        task_run_config=TaskRunConfig(
            max_input_tokens_per_iteration=job["max_input_tokens"], run_with_subtasks=not job["unguided"],
            use_easy_prompt=False, start_time_in_ms=0,
            subtask_config=SubtaskConfig(tasks=tasks, iteration_config=IterationConfig(
                max_iterations=job["max_iterations"], iterations_until_hint=job.get("iterations_until_hint")))),
        agent_config=AgentConfig(deployment_name=MODEL), task_dir=job["task_dir"])
    run_task.TaskRunner.setup_environment = lambda self: None
    runner = run_task.TaskRunner(config=config, benchmark_id="differential", metadata=metadata)
    completion = runner.run_task(
        max_input_tokens=job["max_input_tokens"], max_output_tokens=args.max_output_tokens,
        responses_to_keep=args.responses_to_keep, observations_to_keep=args.observations_to_keep,
        task_objective=args.task_objective, unguided_mode=job["unguided"])
    subtask_runs = list(completion.subtask_completions.values())
    return {
        "commands": [[it.execution_output.command.command_str for it in run.iterations
                      if it.execution_output and it.execution_output.command.command_type == "shell_command"]
                     for run in subtask_runs],
        "answers": [next((it.execution_output.command.command_str for it in run.iterations if it.execution_output
                          and it.execution_output.command.command_type == "answer"), None) for run in subtask_runs],
        "iterations": [len(run.iterations) for run in subtask_runs],
        "scores": [run.score for run in subtask_runs],
    }


if __name__ == "__main__":
    result = run(json.loads(Path(sys.argv[1]).read_text()))
    print("UPSTREAM-RESULT " + json.dumps(result))
