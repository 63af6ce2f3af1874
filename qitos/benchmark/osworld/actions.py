"""Both sides (the agent side's env sends them; the scoring side's provider and evaluator read them): OSWorld action
spaces: `computer_13` action dicts (validated) and `pyautogui` code strings, both turned into the Python snippet the
in-VM controller runs, as upstream does (`python -c "import pyautogui; ..."`).

Arguments are embedded with `repr`, so typed text can never break out of the generated code.
"""

from __future__ import annotations

from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, model_validator

SPECIAL_ACTIONS = ("WAIT", "FAIL", "DONE")
Button = Literal["left", "right", "middle"]
ActionType = Literal[
    "MOVE_TO", "CLICK", "MOUSE_DOWN", "MOUSE_UP", "RIGHT_CLICK", "DOUBLE_CLICK", "DRAG_TO", "SCROLL",
    "TYPING", "PRESS", "KEY_DOWN", "KEY_UP", "HOTKEY", "WAIT", "FAIL", "DONE",
]
_NEEDS_XY = {"MOVE_TO", "DRAG_TO"}
_OPTIONAL_XY = {"CLICK", "RIGHT_CLICK", "DOUBLE_CLICK"}
_NEEDS_KEY = {"PRESS", "KEY_DOWN", "KEY_UP"}


class Computer13Action(BaseModel):
    """One structured action: `{"action_type": "CLICK", "parameters": {"x": 10, "y": 20}}`."""

    model_config = ConfigDict(extra="forbid")

    action_type: ActionType
    parameters: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check_parameters(self) -> "Computer13Action":
        p, kind = self.parameters, self.action_type
        if kind in _NEEDS_XY or (kind in _OPTIONAL_XY and ("x" in p or "y" in p)):
            for axis in ("x", "y"):
                if not isinstance(p.get(axis), (int, float)) or isinstance(p.get(axis), bool):
                    raise ValueError(f"{kind} needs numeric parameter '{axis}'")
        if "button" in p and p["button"] not in ("left", "right", "middle"):
            raise ValueError(f"{kind}: button must be left, right or middle, got {p['button']!r}")
        if kind == "CLICK" and not isinstance(p.get("num_clicks", 1), int):
            raise ValueError("CLICK: num_clicks must be an integer")
        if kind == "SCROLL":
            if "dx" not in p and "dy" not in p:
                raise ValueError("SCROLL needs 'dx' and/or 'dy'")
            if any(not isinstance(p.get(k, 0), int) for k in ("dx", "dy")):
                raise ValueError("SCROLL: dx and dy must be integers")
        if kind == "TYPING" and not isinstance(p.get("text"), str):
            raise ValueError("TYPING needs string parameter 'text'")
        if kind in _NEEDS_KEY and not (isinstance(p.get("key"), str) and p["key"]):
            raise ValueError(f"{kind} needs string parameter 'key'")
        if kind == "HOTKEY":
            keys = p.get("keys")
            if not isinstance(keys, list) or not keys or not all(isinstance(k, str) and k for k in keys):
                raise ValueError("HOTKEY needs a non-empty list of key names 'keys'")
        return self


Action = Union[Computer13Action, str]
"""A computer_13 action, a pyautogui code string, or one of WAIT / FAIL / DONE."""


def parse_action(raw: Any) -> Action:
    """Validate an agent action (dict -> Computer13Action; strings pass through)."""
    if isinstance(raw, Computer13Action):
        return raw
    if isinstance(raw, str):
        return raw
    if isinstance(raw, dict):
        return Computer13Action.model_validate(raw)
    raise ValueError(f"an OSWorld action is a dict or a string, got {type(raw).__name__}")


def action_kind(action: Action) -> str:
    """`WAIT`/`FAIL`/`DONE` for special actions, the action type for dicts, `CODE` for pyautogui code."""
    if isinstance(action, Computer13Action):
        return action.action_type
    return action.strip() if action.strip() in SPECIAL_ACTIONS else "CODE"


def is_fail(action: Any) -> bool:
    """Whether the agent's last action gave up, as upstream's `DesktopEnv` decides it: only the string `FAIL`
    (a computer_13 dict `{"action_type": "FAIL"}` is a no-op there, neither ending the episode nor scoring as
    FAIL). Accepts a list (its last item)."""
    if isinstance(action, list):
        action = action[-1] if action else None
    return isinstance(action, str) and action.strip() == "FAIL"


def is_terminal(action: Any) -> bool:
    """Whether an action ends the episode, as upstream's `DesktopEnv.step` decides it: the strings DONE and FAIL."""
    return isinstance(action, str) and action.strip() in ("DONE", "FAIL")


def computer13_to_pyautogui(action: Computer13Action) -> str | None:
    """pyautogui code for a structured action; None for WAIT/FAIL/DONE (nothing to run in the VM)."""
    p, kind = action.parameters, action.action_type
    button = repr(p.get("button", "left"))
    xy = f"x={p['x']!r}, y={p['y']!r}, " if "x" in p else ""
    if kind == "MOVE_TO":
        return f"pyautogui.moveTo({p['x']!r}, {p['y']!r}, duration=0.5)"
    if kind == "CLICK":
        return f"pyautogui.click({xy}button={button}, clicks={int(p.get('num_clicks', 1))})"
    if kind == "MOUSE_DOWN":
        return f"pyautogui.mouseDown(button={button})"
    if kind == "MOUSE_UP":
        return f"pyautogui.mouseUp(button={button})"
    if kind == "RIGHT_CLICK":
        return f"pyautogui.rightClick({xy.rstrip(', ')})"
    if kind == "DOUBLE_CLICK":
        return f"pyautogui.doubleClick({xy.rstrip(', ')})"
    if kind == "DRAG_TO":
        return f"pyautogui.dragTo({p['x']!r}, {p['y']!r}, duration=1.0, button='left', mouseDownUp=True)"
    if kind == "SCROLL":
        parts = []
        if p.get("dx"):
            parts.append(f"pyautogui.hscroll({int(p['dx'])})")
        if p.get("dy"):
            parts.append(f"pyautogui.vscroll({int(p['dy'])})")
        return "; ".join(parts) or None
    if kind == "TYPING":
        return f"pyautogui.typewrite({p['text']!r})"
    if kind == "PRESS":
        return f"pyautogui.press({p['key']!r})"
    if kind == "KEY_DOWN":
        return f"pyautogui.keyDown({p['key']!r})"
    if kind == "KEY_UP":
        return f"pyautogui.keyUp({p['key']!r})"
    if kind == "HOTKEY":
        return f"pyautogui.hotkey({', '.join(repr(k) for k in p['keys'])})"
    return None


PYAUTOGUI_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; "


def action_command(action: Action, python: str = "python") -> list[str] | None:
    """The argv to send to `/execute` for an action, or None when nothing runs in the VM."""
    if isinstance(action, Computer13Action):
        code = computer13_to_pyautogui(action)
    else:
        code = None if action.strip() in SPECIAL_ACTIONS else action
    return None if code is None else [python, "-c", PYAUTOGUI_PREFIX + code]
