"""computer_13 action validation: OSWorld's shapes parse, anything else fails with the field named."""

from __future__ import annotations

import pytest

from qitos.benchmark.desktop.actions import (
    ACTION_TYPES,
    ActionError,
    ActionExecutor,
    Click,
    Hotkey,
    Scroll,
    Typing,
    parse_action,
)
from qitos.benchmark.desktop.keys import keysym


def test_all_thirteen_plus_three_action_types() -> None:
    assert len(ACTION_TYPES) == 16
    assert {"WAIT", "FAIL", "DONE"} <= set(ACTION_TYPES)


@pytest.mark.parametrize("raw, expected", [
    ({"action_type": "CLICK", "x": 10, "y": 20}, Click(x=10, y=20)),
    ({"action_type": "CLICK", "parameters": {"x": 1, "y": 2, "num_clicks": 3, "button": "right"}},
     Click(x=1, y=2, num_clicks=3, button="right")),
    ({"action_type": "CLICK"}, Click()),
    ({"action_type": "SCROLL", "dx": 0, "dy": -3}, Scroll(dx=0, dy=-3)),
    ({"action_type": "TYPING", "text": "hello\nworld"}, Typing(text="hello\nworld")),
    ({"action_type": "HOTKEY", "keys": ["ctrl", "shift", "t"]}, Hotkey(keys=["ctrl", "shift", "t"])),
])
def test_osworld_shapes_parse(raw: dict, expected: object) -> None:
    assert parse_action(raw) == expected


@pytest.mark.parametrize("name", ["DONE", "FAIL", "WAIT", "done"])
def test_bare_terminal_strings(name: str) -> None:
    assert parse_action(name).action_type == name.upper()


def test_round_trip_through_osworld_form() -> None:
    action = Click(x=5, y=6, num_clicks=2)
    assert parse_action(action.to_osworld()) == action
    assert action.to_osworld() == {"action_type": "CLICK",
                                   "parameters": {"x": 5, "y": 6, "button": "left", "num_clicks": 2}}


@pytest.mark.parametrize("raw, field, fragment", [
    ({"action_type": "CLIK", "x": 1, "y": 1}, "action_type", "unknown action_type 'CLIK'"),
    ({"x": 1}, "action_type", "unknown action_type None"),
    ({"action_type": "CLICK", "x": 10}, "y", "give both x and y"),
    ({"action_type": "CLICK", "x": 1, "y": 2, "num_clicks": 5}, "num_clicks", "1, 2 or 3"),
    ({"action_type": "CLICK", "x": 1, "y": 2, "button": "wheel"}, "button", "'left', 'right' or 'middle'"),
    ({"action_type": "MOVE_TO", "x": -4, "y": 3}, "x", "greater than or equal to 0"),
    ({"action_type": "DRAG_TO", "x": 3}, "y", "Field required"),
    ({"action_type": "SCROLL", "dy": 2}, "dx", "Field required"),
    ({"action_type": "TYPING", "text": ""}, "text", "at least 1 character"),
    ({"action_type": "TYPING", "txt": "hi"}, "text", "unexpected argument(s): txt"),
    ({"action_type": "PRESS", "key": "ctrl+c"}, "key", "use HOTKEY with keys=['ctrl', 'c']"),
    ({"action_type": "PRESS", "key": "hyperdrive"}, "key", "unknown key name 'hyperdrive'"),
    ({"action_type": "KEY_DOWN"}, "key", "Field required"),
    ({"action_type": "HOTKEY", "keys": []}, "keys", "at least 1 item"),
    ({"action_type": "HOTKEY", "keys": ["ctrl", "nope"]}, "keys", "keys[1]: unknown key name 'nope'"),
    ({"action_type": "DONE", "reason": "ok"}, "reason", "DONE takes no argument 'reason'"),
    ({"action_type": "CLICK", "x": 1, "parameters": {"x": 2, "y": 3}}, "x", "both inline and in 'parameters'"),
    ("GO", "action_type", "must be WAIT, FAIL or DONE"),
    (42, "action_type", "must be a dict"),
])
def test_invalid_actions_name_the_field(raw: object, field: str, fragment: str) -> None:
    with pytest.raises(ActionError) as caught:
        parse_action(raw)
    assert caught.value.field == field
    assert fragment in str(caught.value)


def test_points_off_the_screen_are_rejected_before_running() -> None:
    executor = ActionExecutor(":0", 1024, 768)
    executor.check(Click(x=1023, y=767))
    with pytest.raises(ActionError) as caught:
        executor.check(Click(x=1024, y=10))
    assert caught.value.field == "x" and "off the 1024x768 screen" in str(caught.value)
    with pytest.raises(ActionError) as caught:
        executor.check(parse_action({"action_type": "DRAG_TO", "x": 5, "y": 900}))
    assert caught.value.field == "y"


@pytest.mark.parametrize("name, sym", [
    ("enter", "Return"), ("ctrl", "Control_L"), ("pagedown", "Next"), ("F5", "F5"), ("/", "slash"),
    ("a", "a"), ("Z", "Z"), ("esc", "Escape"), ("win", "Super_L"),
])
def test_key_names_map_to_x_keysyms(name: str, sym: str) -> None:
    assert keysym(name) == sym
