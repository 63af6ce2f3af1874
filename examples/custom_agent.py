"""A custom agent for `qit bench run --runner examples.custom_agent:build_agent`.

`--runner module:callable` receives a RecipeContext (the task, its runtime, the options) and
returns an AgentModule. Everything else (model, traces, rows, resume) is the platform's.
"""

from __future__ import annotations

import ast
import operator

from qitos import AgentModule, JsonDecisionParser, tool

_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right))
    raise ValueError("only numbers and + - * / are allowed")


@tool(read_only=True)
def calculate(expression: str) -> str:
    """Evaluate an arithmetic expression with + - * / and parentheses.

    Args:
        expression: e.g. "(17 + 25) * 2"
    """
    value = _evaluate(ast.parse(expression, mode="eval").body)
    return str(int(value)) if float(value).is_integer() else str(value)


class CalculatorAgent(AgentModule):
    name = "calculator-agent"
    toolset_name = "calculator_v1"

    def task_prompt(self, task):
        return f"{task.objective}\nUse the calculate tool, then give the final answer as a bare number."


def build_agent(ctx) -> AgentModule:
    return CalculatorAgent(tools=[calculate], parser=JsonDecisionParser(),
                           system_prompt="You solve arithmetic questions exactly.")
