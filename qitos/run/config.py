"""RunConfig: every `qit bench run` setting in one typed record (also what Ray workers receive)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from qitos.benchmark.base import LoadOptions
from qitos.run.sides.limits import AgentLimits


class ModelConfig(BaseModel):
    model_config = {"protected_namespaces": ()}

    model_name: str = "local"
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int = 0
    top_p: float | None = None
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] | None = None  # merged verbatim into each request
    request_timeout: float | None = None
    max_retries: int | None = None
    think_tags: str | None = None  # "OPEN,CLOSE" or "none"; None: the model family's
    serve_args: list[str] = Field(default_factory=list)  # extra flags for a server QitOS starts (vllm/..., ...)
    serve_timeout: float = 900.0
    server: dict[str, Any] | None = None  # the server QitOS starts for this run (set by qitos.run.model_server.plan)

    def build(self):
        from qitos.models.registry import resolve_model

        return resolve_model(self.model_name, base_url=self.base_url, api_key_env=self.api_key_env,
                             temperature=self.temperature, max_tokens=self.max_tokens, seed=self.seed,
                             **self.controls())

    def controls(self) -> dict[str, Any]:
        """The generation controls that were given (see qitos.models.generation)."""
        given = {"top_p": self.top_p, "reasoning_effort": self.reasoning_effort, "extra_body": self.extra_body,
                 "request_timeout": self.request_timeout, "max_retries": self.max_retries,
                 "think_tags": self.think_tags}
        return {k: v for k, v in given.items() if v is not None}

    @property
    def embedded(self) -> bool:
        """The in-process llama.cpp model: one copy per process, so it is not spread over worker processes."""
        return self.model_name == "local" or self.model_name.startswith("local:")

    @property
    def stateful(self) -> bool:
        """Scripted and replay models keep a position: each task needs its own instance."""
        return self.model_name.startswith(("scripted:", "replay:"))


class RunConfig(BaseModel):
    benchmark: str
    load: LoadOptions = Field(default_factory=LoadOptions)
    recipe: str | None = None
    runner: str | None = None  # "module:callable" building an AgentModule from a RecipeContext
    validator: bool = False  # the runner takes gold (an oracle of the user's): scoring side, never official
    agent_processes: str | None = None  # "task" | "batch"; None: the benchmark's default (see BenchmarkAdapter)
    limits: AgentLimits = Field(default_factory=AgentLimits)  # per task: assets, memory, processes, ... (sides.limits)
    model: ModelConfig = Field(default_factory=ModelConfig)
    concurrency: int = 1
    trials: int = 1
    max_steps: int | None = None
    task_timeout: float | None = None
    output: Path | None = None
    trace_logdir: Path = Path("runs")
    executor: str = "local"
    workers: int | str = "auto"  # local executor: processes sharing `concurrency`; "auto": see runner.auto_workers
    ray_address: str | None = None
    ray_resources: dict[str, float] = Field(default_factory=dict)  # what every Ray job asks for (cluster.placement)
    retry_errors: bool = False
    force: bool = False
    dry_run: bool = False
    parse_error_limit: int = 3
    tool_error_limit: int = 5

    def default_output(self) -> Path:
        from qitos.trace.writer import sanitize

        parts = [self.benchmark, self.load.split, self.load.subset, self.recipe or self.runner, self.model.model_name]
        return Path("results") / (sanitize("_".join(str(p) for p in parts if p), 120) + ".jsonl")

    def recipe_options(self) -> dict[str, Any]:
        return dict(self.load.options)
