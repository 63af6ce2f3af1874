"""Scoring side: the texts of upstream's PromptAgent, read at run time from `<osworld data>/upstream/mm_agents/`.

The `prompt-agent` recipe is upstream's `PromptAgent` request for request, but QitOS carries none of its texts:
the system prompts (`prompts.py`), which prompt goes with which observation type and action space
(`PromptAgent.__init__`), the fixed phrases `predict` wraps each observation in, the image part's fields, the
accessibility-tree table headers (`linearize_accessibility_tree`, `draw_bounding_boxes`) and the trimming mark
(`trim_accessibility_tree`) are parsed from upstream's unmodified files with `ast` (never imported or run), here,
and handed to the agent side (which cannot see the data dir) as plain JSON in its env's arguments, with the
rules for running an action and for a failed model call (`upstream_rules.py`).

A file that does not have the shape of the pinned commit is one `PromptTextsError` naming the file and construct.
"""

from __future__ import annotations

import ast
import threading
from pathlib import Path
from typing import Any

from qitos.benchmark.upstream_source import SourceReader
from qitos.benchmark.osworld.errors import OSWorldError
from qitos.benchmark.osworld.upstream_rules import read_rules

AGENT_PY = Path("mm_agents/agent.py")
PROMPTS_PY = Path("mm_agents/prompts.py")
RETRIEVE_PY = Path("mm_agents/accessibility_tree_wrap/heuristic_retrieve.py")
ACTIONS_PY = Path("desktop_env/actions.py")
PLACEHOLDER = "{}"  # where `predict` formats the linearized tree (or the instruction) into a phrase


class PromptTextsError(OSWorldError):
    """Upstream's PromptAgent files are missing or not the pinned commit's (file and construct named)."""


_LOCK = threading.Lock()
_CACHE: dict[Path, dict[str, Any]] = {}


def load_prompt_texts(osworld_root: Path | str) -> dict[str, Any]:
    """Every text the prompt-agent recipe sends, from `<osworld_root>/upstream` (cached per folder).

    Keys: `system` ({observation_type: {action_space: prompt}}), `task_suffix` (a `{}` template for the
    instruction), `history` and `current` ({observation_type: {text, format}}: the phrase, and whether the tree is
    formatted into it at `{}`),
    `no_thought`, `image_url_prefix`, `image_extra` (the image part's other fields), `a11y_header`,
    `som_header`, `trim_mark`, `namespaces` (the ubuntu accessibility namespaces), `keyboard_keys` (the key
    names upstream's controller accepts in a computer_13 action) and `rules` (how upstream runs an action and
    answers a failed call: `upstream_rules.py`)."""
    root = (Path(osworld_root).expanduser() / "upstream").resolve()
    with _LOCK:
        if root not in _CACHE:
            _CACHE[root] = _read(root)
        return _CACHE[root]


def _read(root: Path) -> dict[str, Any]:
    agent, prompts, retrieve, actions = (_module(root, p) for p in (AGENT_PY, PROMPTS_PY, RETRIEVE_PY, ACTIONS_PY))
    constants = {name: value for name, value in _string_assignments(prompts)}
    system: dict[str, dict[str, str]] = {}
    for obs, space, name in _system_choice(_method(agent, "PromptAgent", "__init__")):
        if name not in constants:
            raise PromptTextsError(f"{root / PROMPTS_PY}: no string constant {name} (named in PromptAgent.__init__)")
        system.setdefault(obs, {})[space] = constants[name]
    predict = _method(agent, "PromptAgent", "predict")
    module_ns = dict(_string_assignments(agent))
    texts: dict[str, Any] = {
        "system": system,
        "task_suffix": _task_suffix(predict),
        "history": _phrases(_loop(predict).body[0]),
        "current": _phrases(_after_loop(predict)),
        "no_thought": _no_thought(_loop(predict)),
        "a11y_header": _first_list_item(_function(agent, "linearize_accessibility_tree", AGENT_PY), AGENT_PY),
        "som_header": _first_list_item(_function(retrieve, "draw_bounding_boxes", RETRIEVE_PY), RETRIEVE_PY),
        "trim_mark": _trim_mark(_function(agent, "trim_accessibility_tree", AGENT_PY)),
        "namespaces": {key: module_ns[f"{key}_ns_ubuntu"] for key in ("attributes", "state", "component", "value")}
        | {"class_windows": module_ns["class_ns_windows"]},
    }
    texts.update(_image_part(predict), keyboard_keys=_keyboard_keys(actions), rules=read_rules(root, _READ))
    for kind in ("history", "current"):
        missing = {"screenshot", "a11y_tree", "screenshot_a11y_tree", "som"} - set(texts[kind])
        if missing:
            raise PromptTextsError(f"{root / AGENT_PY}: PromptAgent.predict has no {kind} phrase for {sorted(missing)}")
    return texts


# -- finding constructs ------------------------------------------------------------------------------------






def _string_assignments(module: ast.Module) -> list[tuple[str, str]]:
    out = []
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = _string(node.value)
            if value is not None:
                out.append((node.targets[0].id, value))
    return out


def _string(node: ast.AST) -> str | None:
    """A string literal, `+` of literals, or `"...".strip()` (as prompts.py writes some prompts)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "strip"
            and not node.args and not node.keywords):
        inner = _string(node.func.value)
        return None if inner is None else inner.strip()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _string(node.left), _string(node.right)
        return None if left is None or right is None else left + right
    return None


def _compared(test: ast.expr, attribute: str) -> list[str] | None:
    """The values `(self.)<attribute> == "x"` or `(self.)<attribute> in ["x", "y"]` tests for, else None."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and (
            (isinstance(test.left, ast.Attribute) and test.left.attr == attribute)
            or (isinstance(test.left, ast.Name) and test.left.id == attribute))):
        return None
    right = test.comparators[0]
    if isinstance(test.ops[0], ast.Eq):
        value = _string(right)
        return None if value is None else [value]
    if isinstance(test.ops[0], ast.In) and isinstance(right, (ast.List, ast.Tuple)):
        values = [_string(e) for e in right.elts]
        return None if None in values else values  # type: ignore[return-value]
    return None


def _branches(node: ast.stmt, attribute: str) -> list[tuple[list[str], list[ast.stmt]]]:
    """An `if/elif` chain on `self.<attribute>`: (values, body) per branch."""
    out = []
    while isinstance(node, ast.If):
        values = _compared(node.test, attribute)
        if values is not None:
            out.append((values, node.body))
        if len(node.orelse) != 1:
            break
        node = node.orelse[0]
    return out


def _system_choice(init: ast.FunctionDef) -> list[tuple[str, str, str]]:
    chain = next((s for s in init.body if isinstance(s, ast.If) and _compared(s.test, "observation_type")), None)
    if chain is None:
        raise PromptTextsError(f"{AGENT_PY}: PromptAgent.__init__ does not choose its system message by observation_type")
    out = []
    for observations, body in _branches(chain, "observation_type"):
        inner = next((s for s in body if isinstance(s, ast.If)), None)
        for spaces, inner_body in _branches(inner, "action_space") if inner is not None else []:
            for stmt in inner_body:
                if (isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Attribute)
                        and stmt.targets[0].attr == "system_message" and isinstance(stmt.value, ast.Name)):
                    out += [(o, s, stmt.value.id) for o in observations for s in spaces]
    if not out:
        raise PromptTextsError(f"{AGENT_PY}: PromptAgent.__init__ assigns no system message")
    return out


def _task_suffix(predict: ast.FunctionDef) -> str:
    for node in ast.walk(predict):
        if (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Attribute)
                and node.left.attr == "system_message" and _format_template(node.right) is not None):
            return _format_template(node.right)  # type: ignore[return-value]
    raise PromptTextsError(f"{AGENT_PY}: PromptAgent.predict does not append the instruction to the system message")


def _format_template(node: ast.AST) -> str | None:
    """`"...{}...".format(x)` → its template."""
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and len(node.args) == 1):
        return _string(node.func.value)
    return None


def _loop(predict: ast.FunctionDef) -> ast.For:
    for node in predict.body:
        if isinstance(node, ast.For):
            return node
    raise PromptTextsError(f"{AGENT_PY}: PromptAgent.predict has no loop over the trajectory")


def _after_loop(predict: ast.FunctionDef) -> ast.stmt:
    body = predict.body
    index = body.index(_loop(predict))
    for node in body[index + 1:]:
        if isinstance(node, ast.If) and _compared(node.test, "observation_type"):
            return node
    raise PromptTextsError(f"{AGENT_PY}: PromptAgent.predict has no message for the current observation")


def _text_values(body: list[ast.stmt]) -> list[ast.expr]:
    """The `"text"` values of the dicts a branch appends, in order."""
    out = []
    for stmt in body:
        for node in ast.walk(stmt):
            if isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if key is not None and _string(key) == "text":
                        out.append(value)
    return out


def _phrase(node: ast.expr, observation: str) -> dict[str, Any] | None:
    """A user message's text for one observation type: a literal, a `.format` template (`format`: the tree goes
    in), or the `A if self.observation_type == "x" else B` choice between them."""
    literal = _string(node)
    if literal is not None:
        return {"text": literal, "format": False}
    template = _format_template(node)
    if template is not None:
        return {"text": template, "format": True}
    if isinstance(node, ast.IfExp):
        values = _compared(node.test, "observation_type")
        if values is not None:
            return _phrase(node.body if observation in values else node.orelse, observation)
    return None


def _phrases(chain: ast.stmt) -> dict[str, dict[str, Any]]:
    out = {}
    for observations, body in _branches(chain, "observation_type"):
        values = _text_values(body)
        for observation in observations:
            phrase = _phrase(values[0], observation) if values else None
            if phrase is None:
                raise PromptTextsError(f"{AGENT_PY}: PromptAgent.predict: no user phrase for {observation}")
            out[observation] = phrase
    return out


def _no_thought(loop: ast.For) -> str:
    for node in ast.walk(loop):
        if isinstance(node, ast.IfExp):
            value = _string(node.orelse)
            if value is not None:
                return value
    raise PromptTextsError(f"{AGENT_PY}: PromptAgent.predict has no text for a step without a thought")


def _image_part(predict: ast.FunctionDef) -> dict[str, Any]:
    """The image part's URL prefix (before the base64 data) and its other fields (e.g. detail)."""
    for node in ast.walk(predict):
        if isinstance(node, ast.Dict):
            fields = {_string(k): v for k, v in zip(node.keys, node.values) if k is not None}
            url = fields.get("url")
            if isinstance(url, ast.JoinedStr) and url.values and _string(url.values[0]) is not None:
                extra = {k: _string(v) for k, v in fields.items() if k != "url"}
                if None in extra.values():
                    break
                return {"image_url_prefix": _string(url.values[0]), "image_extra": extra}
    raise PromptTextsError(f"{AGENT_PY}: PromptAgent.predict has no image part with a data URL")


def _first_list_item(function: ast.FunctionDef, where: Path) -> str:
    for node in ast.walk(function):
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.List)
                and len(node.value.elts) == 1):
            value = _string(node.value.elts[0])
            if value is not None:
                return value
    raise PromptTextsError(f"{where}: {function.name} starts no table with a header row")


def _trim_mark(function: ast.FunctionDef) -> str:
    for node in ast.walk(function):
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and _string(node.value) is not None:
            return _string(node.value)  # type: ignore[return-value]
    raise PromptTextsError(f"{AGENT_PY}: trim_accessibility_tree appends no mark to a trimmed tree")


def _keyboard_keys(module: ast.Module) -> list[str]:
    for node in module.body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "KEYBOARD_KEYS"):
            try:
                keys = ast.literal_eval(node.value)
            except ValueError:
                break
            if isinstance(keys, list) and all(isinstance(k, str) for k in keys):
                return keys
    raise PromptTextsError(f"{ACTIONS_PY}: no KEYBOARD_KEYS list of key names")


_READ = SourceReader(PromptTextsError, PromptTextsError, "run `qit data fetch osworld` (or point --data-dir / "
                     "QITOS_DATA_DIR at a copy that has osworld/upstream/)")
_module, _function = _READ.parse, _READ.function


def _method(module: ast.Module, cls: str, name: str) -> ast.FunctionDef:
    return _READ.method(module, cls, name, AGENT_PY)
