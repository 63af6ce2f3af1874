"""Scoring side (used by `actions.py`): key names agents use (OSWorld / pyautogui style: "enter", "ctrl", "pagedown") mapped to X keysyms for xdotool.

Validation happens here, before anything reaches the desktop, so a misspelt key is an invalid action with a
clear message rather than a keystroke xdotool silently drops.
"""

from __future__ import annotations

import string

_NAMED: dict[str, str] = {
    "enter": "Return", "return": "Return", "\n": "Return", "\r": "Return",
    "tab": "Tab", "\t": "Tab", "space": "space", " ": "space",
    "backspace": "BackSpace", "delete": "Delete", "del": "Delete", "insert": "Insert",
    "esc": "Escape", "escape": "Escape",
    "up": "Up", "down": "Down", "left": "Left", "right": "Right",
    "home": "Home", "end": "End", "pageup": "Prior", "pgup": "Prior", "pagedown": "Next", "pgdn": "Next",
    "ctrl": "Control_L", "ctrlleft": "Control_L", "ctrlright": "Control_R", "control": "Control_L",
    "shift": "Shift_L", "shiftleft": "Shift_L", "shiftright": "Shift_R",
    "alt": "Alt_L", "altleft": "Alt_L", "altright": "Alt_R", "option": "Alt_L",
    "win": "Super_L", "winleft": "Super_L", "winright": "Super_R", "super": "Super_L", "command": "Super_L",
    "meta": "Meta_L", "apps": "Menu", "menu": "Menu",
    "capslock": "Caps_Lock", "numlock": "Num_Lock", "scrolllock": "Scroll_Lock",
    "printscreen": "Print", "print": "Print", "prtsc": "Print", "prtscr": "Print", "prntscrn": "Print",
    "pause": "Pause", "clear": "Clear", "help": "Help", "select": "Select",
    "add": "KP_Add", "subtract": "KP_Subtract", "multiply": "KP_Multiply", "divide": "KP_Divide",
    "decimal": "KP_Decimal", "separator": "KP_Separator",
    "volumeup": "XF86AudioRaiseVolume", "volumedown": "XF86AudioLowerVolume", "volumemute": "XF86AudioMute",
    "playpause": "XF86AudioPlay", "nexttrack": "XF86AudioNext", "prevtrack": "XF86AudioPrev",
    "stop": "XF86AudioStop", "browserback": "XF86Back", "browserforward": "XF86Forward",
    "browserrefresh": "XF86Reload", "browserhome": "XF86HomePage",
}

_PUNCTUATION: dict[str, str] = {
    "!": "exclam", '"': "quotedbl", "#": "numbersign", "$": "dollar", "%": "percent", "&": "ampersand",
    "'": "apostrophe", "(": "parenleft", ")": "parenright", "*": "asterisk", "+": "plus", ",": "comma",
    "-": "minus", ".": "period", "/": "slash", ":": "colon", ";": "semicolon", "<": "less", "=": "equal",
    ">": "greater", "?": "question", "@": "at", "[": "bracketleft", "\\": "backslash", "]": "bracketright",
    "^": "asciicircum", "_": "underscore", "`": "grave", "{": "braceleft", "|": "bar", "}": "braceright",
    "~": "asciitilde",
}

_NAMED.update({f"f{n}": f"F{n}" for n in range(1, 25)})
_NAMED.update({f"num{n}": f"KP_{n}" for n in range(10)})


def keysym(name: str) -> str:
    """The X keysym for one key name; raises ValueError with a hint for anything unknown."""
    if not isinstance(name, str) or name == "":
        raise ValueError("a key name must be a non-empty string")
    if len(name) == 1:
        if name in string.ascii_letters or name in string.digits:
            return name
        if name in _PUNCTUATION:
            return _PUNCTUATION[name]
        if name in _NAMED:
            return _NAMED[name]
    lowered = name.lower()
    if lowered in _NAMED:
        return _NAMED[lowered]
    if "+" in name and len(name) > 1:
        parts = [p.strip().lower() for p in name.split("+")]
        raise ValueError(f"'{name}' is a key combination, not a key; use HOTKEY with keys={parts!r}")
    raise ValueError(f"unknown key name '{name}'; use a single character or a name such as "
                     "enter, tab, esc, backspace, ctrl, shift, alt, up, pagedown, f5")


def known_key(name: str) -> bool:
    try:
        keysym(name)
    except ValueError:
        return False
    return True
