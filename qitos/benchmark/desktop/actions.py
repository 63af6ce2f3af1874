"""Both sides: OSWorld's `computer_13` action space as validated records (the recipes read it), executed with
xdotool on one X display (scoring side).

Names and arguments follow OSWorld so an agent prompt written for OSWorld works unchanged: MOVE_TO(x, y),
CLICK(x?, y?, button?, num_clicks?), MOUSE_DOWN(button?), MOUSE_UP(button?), RIGHT_CLICK(x?, y?),
DOUBLE_CLICK(x?, y?), DRAG_TO(x, y), SCROLL(dx, dy), TYPING(text), PRESS(key), KEY_DOWN(key), KEY_UP(key),
HOTKEY(keys), and WAIT, FAIL, DONE. A bad action raises `ActionError` naming the field, before anything runs.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from qitos.benchmark.desktop.keys import keysym

Button = Literal["left", "right", "middle"]
_BUTTON_NUMBER = {"left": "1", "middle": "2", "right": "3"}


class ActionError(ValueError):
    """An action that cannot run: unknown type, a missing or bad argument, a point off the screen."""

    def __init__(self, message: str, *, action_type: str | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.action_type = action_type
        self.field = field


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def point(self) -> tuple[int, int] | None:
        """Where this action puts the pointer, if it names a point."""
        x, y = getattr(self, "x", None), getattr(self, "y", None)
        return (x, y) if x is not None and y is not None else None

    def to_osworld(self) -> dict[str, Any]:
        """The OSWorld dict form: {"action_type": ..., "parameters": {...}}."""
        params = self.model_dump(exclude={"action_type"}, exclude_none=True)
        return {"action_type": getattr(self, "action_type"), "parameters": params}


class _OptionalPoint(_Action):
    x: Annotated[int, Field(ge=0)] | None = None
    y: Annotated[int, Field(ge=0)] | None = None

    @model_validator(mode="after")
    def _both_or_neither(self) -> "_OptionalPoint":
        if (self.x is None) != (self.y is None):
            missing = "y" if self.y is None else "x"
            raise ValueError(f"give both x and y or neither; '{missing}' is missing")
        return self


class MoveTo(_Action):
    action_type: Literal["MOVE_TO"] = "MOVE_TO"
    x: Annotated[int, Field(ge=0)]
    y: Annotated[int, Field(ge=0)]


class Click(_OptionalPoint):
    action_type: Literal["CLICK"] = "CLICK"
    button: Button = "left"
    num_clicks: Literal[1, 2, 3] = 1


class MouseDown(_Action):
    action_type: Literal["MOUSE_DOWN"] = "MOUSE_DOWN"
    button: Button = "left"


class MouseUp(_Action):
    action_type: Literal["MOUSE_UP"] = "MOUSE_UP"
    button: Button = "left"


class RightClick(_OptionalPoint):
    action_type: Literal["RIGHT_CLICK"] = "RIGHT_CLICK"


class DoubleClick(_OptionalPoint):
    action_type: Literal["DOUBLE_CLICK"] = "DOUBLE_CLICK"


class DragTo(_Action):
    """Press the left button where the pointer is, move to (x, y), release."""

    action_type: Literal["DRAG_TO"] = "DRAG_TO"
    x: Annotated[int, Field(ge=0)]
    y: Annotated[int, Field(ge=0)]


class Scroll(_Action):
    """Wheel clicks: dy > 0 scrolls up, dx > 0 scrolls right (pyautogui's convention)."""

    action_type: Literal["SCROLL"] = "SCROLL"
    dx: Annotated[int, Field(ge=-50, le=50)]
    dy: Annotated[int, Field(ge=-50, le=50)]


class Typing(_Action):
    action_type: Literal["TYPING"] = "TYPING"
    text: Annotated[str, Field(min_length=1, max_length=5000)]


class _KeyAction(_Action):
    key: str

    @field_validator("key")
    @classmethod
    def _known(cls, value: str) -> str:
        keysym(value)
        return value


class Press(_KeyAction):
    action_type: Literal["PRESS"] = "PRESS"


class KeyDown(_KeyAction):
    action_type: Literal["KEY_DOWN"] = "KEY_DOWN"


class KeyUp(_KeyAction):
    action_type: Literal["KEY_UP"] = "KEY_UP"


class Hotkey(_Action):
    action_type: Literal["HOTKEY"] = "HOTKEY"
    keys: Annotated[list[str], Field(min_length=1, max_length=6)]

    @field_validator("keys")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        for index, key in enumerate(value):
            try:
                keysym(key)
            except ValueError as exc:
                raise ValueError(f"keys[{index}]: {exc}") from None
        return value


class Wait(_Action):
    action_type: Literal["WAIT"] = "WAIT"


class Fail(_Action):
    """The agent declares the task infeasible."""

    action_type: Literal["FAIL"] = "FAIL"


class Done(_Action):
    """The agent declares the task finished."""

    action_type: Literal["DONE"] = "DONE"


AnyAction = Union[MoveTo, Click, MouseDown, MouseUp, RightClick, DoubleClick, DragTo, Scroll, Typing, Press, KeyDown,
                  KeyUp, Hotkey, Wait, Fail, Done]
Action = Annotated[AnyAction, Field(discriminator="action_type")]
ACTION_TYPES: tuple[str, ...] = ("MOVE_TO", "CLICK", "MOUSE_DOWN", "MOUSE_UP", "RIGHT_CLICK", "DOUBLE_CLICK",
                                 "DRAG_TO", "SCROLL", "TYPING", "PRESS", "KEY_DOWN", "KEY_UP", "HOTKEY", "WAIT",
                                 "FAIL", "DONE")
POINTER_ACTIONS = frozenset({"MOVE_TO", "CLICK", "MOUSE_DOWN", "MOUSE_UP", "RIGHT_CLICK", "DOUBLE_CLICK", "DRAG_TO",
                             "SCROLL"})
TERMINAL_ACTIONS = frozenset({"FAIL", "DONE"})
_ADAPTER: TypeAdapter[AnyAction] = TypeAdapter(Action)


def parse_action(raw: Any) -> AnyAction:
    """An `Action` from a record, an OSWorld dict (flat or with "parameters"), or "WAIT" / "FAIL" / "DONE"."""
    if isinstance(raw, _Action):
        return raw  # type: ignore[return-value]
    if isinstance(raw, str):
        name = raw.strip().upper()
        if name in ("WAIT", "FAIL", "DONE"):
            return _ADAPTER.validate_python({"action_type": name})
        raise ActionError(f"a bare string action must be WAIT, FAIL or DONE, got {raw!r}", field="action_type")
    if not isinstance(raw, Mapping):
        raise ActionError(f"an action must be a dict with 'action_type', got {type(raw).__name__}", field="action_type")
    data = dict(raw)
    params = data.pop("parameters", None)
    if params is not None:
        if not isinstance(params, Mapping):
            raise ActionError("'parameters' must be a dict of arguments", field="parameters")
        clash = sorted(set(params) & set(data))
        if clash:
            raise ActionError(f"argument {clash[0]!r} is given both inline and in 'parameters'", field=clash[0])
        data.update(params)
    action_type = data.get("action_type")
    if not isinstance(action_type, str) or action_type not in ACTION_TYPES:
        raise ActionError(f"unknown action_type {action_type!r}; expected one of {', '.join(ACTION_TYPES)}",
                          field="action_type")
    try:
        return _ADAPTER.validate_python(data)
    except ValidationError as exc:
        raise _explain(action_type, exc) from None


def _explain(action_type: str, exc: ValidationError) -> ActionError:
    errors = exc.errors()
    extras = [str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden"]
    first = next((e for e in errors if e["type"] != "extra_forbidden"), errors[0])
    location = [str(part) for part in first["loc"] if str(part) != action_type]
    field = location[0] if location else None
    message = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        message = f"{action_type} takes no argument '{field}'"
    elif field:
        got = first.get("input")
        suffix = "" if first["type"] == "missing" else f" (got {got!r})"
        message = f"{action_type}: field '{'.'.join(location)}': {message}{suffix}"
        if extras:
            message += f"; unexpected argument(s): {', '.join(extras)}"
    else:
        named = re.search(r"'(\w+)' is missing", message)
        field = named.group(1) if named else None
        message = f"{action_type}: {message}"
    return ActionError(message, action_type=action_type, field=field)


class Pointer(BaseModel):
    x: int
    y: int


class ActionExecutor:
    """Runs actions on one display through xdotool and reports where the pointer ended up."""

    def __init__(self, display: str, width: int, height: int, *, env: dict[str, str] | None = None,
                 wait_seconds: float = 1.0, timeout: float = 20.0) -> None:
        self.display, self.width, self.height = display, width, height
        self.env = dict(env or {})
        self.env["DISPLAY"] = display
        self.wait_seconds, self.timeout = wait_seconds, timeout

    def execute(self, raw: Any) -> Pointer:
        """Run one action (validated first) and return the pointer position afterwards."""
        action = parse_action(raw)
        self.check(action)
        if isinstance(action, (Wait, Fail, Done)):
            if isinstance(action, Wait):
                time.sleep(self.wait_seconds)
            return self.pointer()
        if isinstance(action, Typing):
            # `type` swallows every later argument, so the text goes through stdin and nothing is chained.
            self._run(["type", "--delay", "12", "--file", "-"], stdin=action.text)
            return self.pointer()
        if isinstance(action, DragTo):
            return self._drag(action.x, action.y)
        return self._run(self._command(action) + ["getmouselocation", "--shell"])

    @staticmethod
    def _command(action: AnyAction) -> list[str]:
        point = action.point()
        move = ["mousemove", str(point[0]), str(point[1])] if point else []
        if isinstance(action, MoveTo):
            return move
        if isinstance(action, Click):
            button = _BUTTON_NUMBER[action.button]
            return move + ["click", "--repeat", str(action.num_clicks), "--delay", "80", button]
        if isinstance(action, (RightClick, DoubleClick)):
            button, repeat = ("3", "1") if isinstance(action, RightClick) else ("1", "2")
            return move + ["click", "--repeat", repeat, "--delay", "80", button]
        if isinstance(action, (MouseDown, MouseUp)):
            return ["mousedown" if isinstance(action, MouseDown) else "mouseup", _BUTTON_NUMBER[action.button]]
        if isinstance(action, Scroll):
            command: list[str] = []
            for amount, positive, negative in ((action.dy, "4", "5"), (action.dx, "7", "6")):
                if amount:
                    command += ["click", "--repeat", str(abs(amount)), "--delay", "30",
                                positive if amount > 0 else negative]
            return command
        if isinstance(action, Press):
            return ["key", "--", keysym(action.key)]
        if isinstance(action, (KeyDown, KeyUp)):
            return ["keydown" if isinstance(action, KeyDown) else "keyup", "--", keysym(action.key)]
        if isinstance(action, Hotkey):
            # Press in order, release in reverse, with a pause after each press: sent as one burst (`key a+b`),
            # openbox now and then misses a chord such as alt+F4 that arrives right after a click.
            syms = [keysym(k) for k in action.keys]
            command = []
            for sym in syms:
                command += ["keydown", "--", sym, "sleep", "0.03"]
            for sym in reversed(syms):
                command += ["keyup", "--", sym]
            return command
        kind = action.action_type
        raise ActionError(f"no way to execute {kind}", action_type=kind, field="action_type")

    def _drag(self, x: int, y: int) -> Pointer:
        """Press, glide in small timed steps (window managers ignore instant jumps), release."""
        start = self.pointer()
        command = ["mousedown", "1", "sleep", "0.05"]
        steps = 8
        for i in range(1, steps + 1):
            px = start.x + (x - start.x) * i // steps
            py = start.y + (y - start.y) * i // steps
            command += ["mousemove", str(px), str(py), "sleep", "0.03"]
        return self._run(command + ["mouseup", "1", "getmouselocation", "--shell"])

    def check(self, action: AnyAction) -> None:
        """Reject a point off this screen (ActionError naming x or y)."""
        point = action.point()
        if point is None:
            return
        for field, value, limit in (("x", point[0], self.width), ("y", point[1], self.height)):
            if value >= limit:
                raise ActionError(f"{action.action_type}: field '{field}': {value} is off the "
                                  f"{self.width}x{self.height} screen", action_type=action.action_type, field=field)

    def pointer(self) -> Pointer:
        return self._run(["getmouselocation", "--shell"])

    def _run(self, args: list[str], stdin: str | None = None) -> Pointer:
        try:
            done = subprocess.run(["xdotool", *args], input=stdin, env=self.env, capture_output=True, text=True,
                                  timeout=self.timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"xdotool failed on display {self.display}: {exc}") from exc
        # a key press that closes its own window (Alt+F4) can race xdotool's follow-up query: the
        # press happened, the window is just gone, so BadWindow after a key command is success
        closed_itself = args and args[0] in ("key", "keydown", "keyup") and "BadWindow" in done.stderr
        if done.returncode != 0 and not closed_itself:
            raise RuntimeError(f"xdotool {' '.join(args[:2])} failed on display {self.display} "
                               f"(exit {done.returncode}): {done.stderr.strip()[:300]}")
        return _parse_location(done.stdout) or Pointer(x=-1, y=-1)

    def screenshot(self, path: str | Path) -> Path:
        return screenshot(path, self.display, env=self.env)


def _parse_location(text: str) -> Pointer | None:
    found = dict(re.findall(r"^(X|Y)=(-?\d+)$", text, flags=re.MULTILINE))
    if "X" in found and "Y" in found:
        return Pointer(x=int(found["X"]), y=int(found["Y"]))
    return None


def screenshot(path: str | Path, display: str, *, env: dict[str, str] | None = None) -> Path:
    """Save the whole screen of `display` as a PNG; Pillow over XCB, else ImageMagick's `import`."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        from PIL import ImageGrab

        ImageGrab.grab(xdisplay=display).save(target, format="PNG")
        return target
    except (ImportError, OSError):
        pass
    run_env = dict(env or {})
    run_env["DISPLAY"] = display
    done = subprocess.run(["import", "-window", "root", f"png:{target}"], env=run_env, capture_output=True,
                          text=True, timeout=30)
    if done.returncode != 0 or not target.exists():
        raise RuntimeError(f"screenshot of display {display} failed: {done.stderr.strip()[:300]}")
    return target
