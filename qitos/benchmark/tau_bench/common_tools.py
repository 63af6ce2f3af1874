"""Scoring side (it runs every action of an episode and replays gold with it; the agent side only names tools): the tool base class, the record lookup and the tools both domains share (calculate, think, transfer, user details).

Every tool is a class named like upstream's with a static ``invoke(data, <params>)`` whose
parameter names and order are upstream's, so Python itself produces the exact ``TypeError``
texts the model sees for missing or unexpected arguments (e.g. ``GetUserDetails.invoke()
missing 1 required positional argument: 'user_id'``). Tools return the observation string;
errors the model caused are returned as ``"Error: ..."`` strings or raised as Python would.
"""

from __future__ import annotations

import ast
import json
import warnings
from typing import Any, ClassVar

_CALC_CHARACTERS = "0123456789+-*/(). "
# Local safety addition: refuse integer arithmetic whose result could exceed ~1M bits
# (upstream evaluates "9**9**9" for ever; below this bound every operation takes < 50 ms).
_MAX_INT_BITS = 1 << 20
TOO_LARGE_MESSAGE = "expression too large to evaluate"


class Tool:
    """Base of every tau-bench tool. ``name`` is the tool name the agent calls."""

    name: ClassVar[str]

    @staticmethod
    def invoke(data: Any, **kwargs: Any) -> str | None:
        raise NotImplementedError


def record_json(table: dict[str, Any], key: str, what: str) -> str:
    """A record as upstream prints it (json.dumps, stored key order), or upstream's not-found error."""
    if key in table:
        return json.dumps(table[key])
    return f"Error: {what} not found"


class GetUserDetails(Tool):
    name = "get_user_details"

    @staticmethod
    def invoke(data: Any, user_id: str) -> str:
        return record_json(data["users"], user_id, "user")


class Calculate(Tool):
    name = "calculate"

    @staticmethod
    def invoke(data: Any, expression: str) -> str:
        # Outside the try on purpose: a non-string surfaces as the env-level "Error: ..." text.
        if not all(char in _CALC_CHARACTERS for char in expression):
            return "Error: invalid characters in expression"
        try:
            return str(round(float(_evaluate(expression)), 2))
        except Exception as exc:  # noqa: BLE001 - every failure is reported to the model
            return f"Error: {exc}"


class Think(Tool):
    name = "think"

    @staticmethod
    def invoke(data: Any, thought: str) -> str:
        return ""


class TransferToHumanAgents(Tool):
    name = "transfer_to_human_agents"

    @staticmethod
    def invoke(data: Any, summary: str) -> str:
        return "Transfer successful"


class _TooLarge(Exception):
    def __str__(self) -> str:
        return TOO_LARGE_MESSAGE


def _evaluate(expression: Any) -> Any:
    """Python's ``eval`` without builtins, with a size guard on integer results."""
    scope: dict[str, Any] = {"__builtins__": None}
    if not isinstance(expression, str):  # e.g. a list of digit strings: let eval word the error
        return eval(expression, scope, {})  # noqa: S307 - character-whitelisted input
    source = expression.lstrip(" \t")  # what eval() does to a string before compiling it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "'int' object is not callable; perhaps ..." for "(1)(2)"
        try:
            tree = compile(source, "<string>", "eval", ast.PyCF_ONLY_AST)
        except RecursionError:
            # Too deeply nested to inspect: let the compiler word its own error, and never run it.
            compile(source, "<string>", "eval")
            raise _TooLarge() from None
        _check_int_sizes(tree)
        code = compile(tree, "<string>", "eval")
    return eval(code, scope, {})  # noqa: S307 - character-whitelisted input


def _check_int_sizes(tree: ast.AST) -> None:
    """Bound the bit length of every integer-valued sub-expression; raise if one may be huge.

    Nodes are visited children first (reversed breadth-first order), iteratively so that long
    chains like "1+1+...+1" do not hit the recursion limit.
    """
    bits: dict[int, float | None] = {}
    for node in reversed(list(ast.walk(tree))):
        value: float | None = None
        if isinstance(node, ast.Constant):
            if type(node.value) is int:
                value = node.value.bit_length()
        elif isinstance(node, ast.UnaryOp):
            value = bits.get(id(node.operand))
        elif isinstance(node, ast.BinOp):
            left, right = bits.get(id(node.left)), bits.get(id(node.right))
            if left is not None and right is not None:
                value = _binop_bits(node.op, left, right)
        if value is not None and value > _MAX_INT_BITS:
            raise _TooLarge()
        bits[id(node)] = value


def _binop_bits(op: ast.operator, left: float, right: float) -> float | None:
    """Upper bound on the bit length of ``a op b`` for ints of at most `left`/`right` bits."""
    if isinstance(op, (ast.Add, ast.Sub)):
        return max(left, right) + 1
    if isinstance(op, ast.Mult):
        return left + right
    if isinstance(op, ast.FloorDiv):
        return left + 1
    if isinstance(op, ast.Pow):
        if left <= 1:  # base in {-1, 0, 1}: any power stays in it
            return left
        return float("inf") if right > 64 else left * 2.0**right
    return None  # true division gives a float
