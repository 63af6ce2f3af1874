"""Task: what an agent is asked to do, with its resources, environment and budget.

Reference answers live in `metadata` under keys listed in `PRIVATE_METADATA_KEYS` (or any key
starting with `_`); `public_summary()` drops them so they never reach a manifest.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

PRIVATE_METADATA_KEYS = frozenset({
    "answer", "answers", "reference", "reference_answer", "gold", "gold_actions", "gold_outputs",
    "expected", "solution", "flag", "final_answer", "outputs", "actions", "subtask_answers",
})


class Resource(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["file", "dir", "url"] = "file"
    path: str
    required: bool = True
    description: str | None = None


class EnvSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: str = "none"
    config: dict[str, Any] = Field(default_factory=dict)
    capabilities: list[str] = Field(default_factory=list)


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_steps: int | None = 20
    max_runtime_seconds: float | None = None
    max_tokens: int | None = None
    max_cost: float | None = None


class TaskIssue(BaseModel):
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


class TaskValidationError(ValueError):
    def __init__(self, task_id: str, issues: list[TaskIssue]) -> None:
        self.issues = issues
        lines = "\n".join(f"  - {issue}" for issue in issues)
        super().__init__(f"task '{task_id}' is not valid:\n{lines}")


class Task(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    objective: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    resources: list[Resource] = Field(default_factory=list)
    env_spec: EnvSpec = Field(default_factory=EnvSpec)
    success_criteria: list[str] = Field(default_factory=list)
    budget: Budget = Field(default_factory=Budget)
    metadata: dict[str, Any] = Field(default_factory=dict)

    def validate_task(self) -> list[TaskIssue]:
        """Every problem at once, each naming the field and the fix (empty list = valid)."""
        issues: list[TaskIssue] = []
        if not self.id.strip():
            issues.append(TaskIssue(field="id", message="must not be empty"))
        if not self.objective.strip():
            issues.append(TaskIssue(field="objective", message="must say what the agent should do"))
        b = self.budget
        for name in ("max_steps", "max_runtime_seconds", "max_tokens", "max_cost"):
            value = getattr(b, name)
            if value is not None and value <= 0:
                issues.append(TaskIssue(field=f"budget.{name}", message=f"must be positive or null, got {value}"))
        for i, res in enumerate(self.resources):
            if not res.path.strip():
                issues.append(TaskIssue(field=f"resources[{i}].path", message="must not be empty"))
        answer_like = PRIVATE_METADATA_KEYS.intersection(k.lower() for k in self.inputs)
        if answer_like:
            issues.append(TaskIssue(
                field="inputs", message=f"keys {sorted(answer_like)} look like reference answers; move them to metadata"))
        return issues

    def raise_if_invalid(self) -> None:
        issues = self.validate_task()
        if issues:
            raise TaskValidationError(self.id, issues)

    def public_summary(self) -> dict[str, Any]:
        """What a manifest may show: no reference answers."""
        meta = {k: v for k, v in self.metadata.items() if k.lower() not in PRIVATE_METADATA_KEYS and not k.startswith("_")}
        return {"id": self.id, "objective": self.objective, "metadata": meta}
