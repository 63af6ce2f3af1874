import pytest

from qitos.core.task import Budget, Task, TaskValidationError


def test_validation_lists_every_issue():
    task = Task(id=" ", objective="", budget=Budget(max_steps=0, max_cost=-1), inputs={"answer": "x"})
    fields = {i.field for i in task.validate_task()}
    assert fields == {"id", "objective", "budget.max_steps", "budget.max_cost", "inputs"}
    with pytest.raises(TaskValidationError, match="budget.max_steps: must be positive"):
        task.raise_if_invalid()


def test_public_summary_hides_reference_answers():
    task = Task(id="t", objective="o", metadata={"answer": "42", "_gold": [1], "level": 2, "gold_actions": []})
    assert task.public_summary() == {"id": "t", "objective": "o", "metadata": {"level": 2}}
