"""Scoring side: upstream's rules for running an action and for a failed model call, read at run time from
`<osworld data>/upstream/` for the `prompt-agent` recipe (they travel to the agent side with its texts).

Which computer_13 actions upstream runs, refuses or silently skips, what pyautogui code each becomes, and how
long each action sleeps are decided by two of upstream's methods: `DesktopEnv.step` (`desktop_env/desktop_env.py`)
and `PythonController.execute_action` (`desktop_env/controllers/python.py`). No table of QitOS's could match them
case for case (`MOVE_TO {}` runs `moveTo()`, `DRAG_TO {}` runs nothing, `TYPING 5` runs `typewrite(5)`,
`MOUSE_DOWN {x, y}` raises, ...), so their source is handed over as is, with its annotations left out, and the
agent side runs it against a recording stand-in for the VM and the clock (`upstream_step.py`). Each method may
use only the module-level names the stand-in provides (checked here, so a changed upstream fails at load with
the name, not in an episode). Nothing is imported from upstream; nothing of it is in QitOS.

From `PromptAgent.call_llm` come the error code it resends a shorter request on and the seconds it waits after a
failed call; from `PythonController.__init__` the prefix its `/execute` commands start with.
"""

from __future__ import annotations

import ast
import builtins
import copy
from pathlib import Path
from typing import Any

from qitos.benchmark.upstream_source import SourceReader

DESKTOP_ENV_PY = Path("desktop_env/desktop_env.py")
PYTHON_PY = Path("desktop_env/controllers/python.py")
AGENT_PY = Path("mm_agents/agent.py")
# the module-level names each method may use: what upstream_step.py gives it
STEP_GLOBALS = frozenset({"time"})
EXECUTE_GLOBALS = frozenset({"random", "KEYBOARD_KEYS"})


def read_rules(root: Path, reader: SourceReader) -> dict[str, Any]:
    """`step` and `execute_action` (source), `pkgs_prefix`, and `failed_call` ({`resend_code`, `wait_seconds`})."""
    env, controller, agent = (reader.parse(root, p) for p in (DESKTOP_ENV_PY, PYTHON_PY, AGENT_PY))
    return {
        "step": _source(reader.method(env, "DesktopEnv", "step", DESKTOP_ENV_PY), STEP_GLOBALS, DESKTOP_ENV_PY, reader),
        "execute_action": _source(reader.method(controller, "PythonController", "execute_action", PYTHON_PY),
                                  EXECUTE_GLOBALS, PYTHON_PY, reader),
        "pkgs_prefix": _default(reader.method(controller, "PythonController", "__init__", PYTHON_PY), "pkgs_prefix",
                                reader),
        "failed_call": _failed_call(reader.method(agent, "PromptAgent", "call_llm", AGENT_PY), reader),
    }


def _source(fn: ast.FunctionDef, allowed: frozenset[str], where: Path, reader: SourceReader) -> str:
    """The method as a plain function's source: no decorators, no annotations; refused if it uses a module-level
    name the stand-in does not provide."""
    node = copy.deepcopy(fn)
    node.decorator_list, node.returns = [], None
    for arg in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs, node.args.vararg, node.args.kwarg):
        if arg is not None:
            arg.annotation = None
    bound = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
    bound |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    bound |= {n.name for n in ast.walk(node) if isinstance(n, ast.ExceptHandler) and n.name}
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    unknown = sorted(used - bound - set(dir(builtins)) - allowed)
    if unknown:
        raise reader.error(f"{where}: {fn.name}() uses {', '.join(unknown)}, which QitOS's stand-in for the VM does "
                           f"not provide (it provides {', '.join(sorted(allowed))})")
    return ast.unparse(ast.fix_missing_locations(node))


def _default(fn: ast.FunctionDef, name: str, reader: SourceReader) -> str:
    args = fn.args.args
    defaults = dict(zip([a.arg for a in args[len(args) - len(fn.args.defaults):]], fn.args.defaults))
    value = defaults.get(name)
    if isinstance(value, ast.Constant) and isinstance(value.value, str) and "{command}" in value.value:
        return value.value
    raise reader.error(f"{PYTHON_PY}: PythonController.__init__ has no string default for {name} with {{command}}")


def _failed_call(fn: ast.FunctionDef, reader: SourceReader) -> dict[str, Any]:
    """The first `== "<code>"` test and the first `time.sleep(<seconds>)` of call_llm (its OpenAI branch)."""
    nodes = sorted((n for n in ast.walk(fn) if hasattr(n, "lineno")), key=lambda n: (n.lineno, n.col_offset))
    code = next((c.comparators[0].value for c in nodes if isinstance(c, ast.Compare) and isinstance(c.ops[0], ast.Eq)
                 and isinstance(c.comparators[0], ast.Constant) and isinstance(c.comparators[0].value, str)), None)
    wait = next((c.args[0].value for c in nodes if isinstance(c, ast.Call) and ast.unparse(c.func) == "time.sleep"
                 and c.args and isinstance(c.args[0], ast.Constant) and isinstance(c.args[0].value, (int, float))), None)
    if code is None or wait is None:
        raise reader.error(f"{AGENT_PY}: PromptAgent.call_llm has no error-code test or no time.sleep(seconds) "
                           "after a failed call")
    return {"resend_code": code, "wait_seconds": float(wait)}
