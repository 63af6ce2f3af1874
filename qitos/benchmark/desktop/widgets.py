"""Both sides (plain data): what a task app publishes about itself: windows and widgets with screen bounds, and its real state.

Both the apps (writers) and the environment (reader) use these records, so the text an agent reads, the
oracle's click targets and the grounding check all come from one description of the screen.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field


class Bounds(BaseModel):
    """A rectangle in screen pixels; `x`/`y` is the top-left corner."""

    x: int
    y: int
    width: int
    height: int

    @property
    def center(self) -> tuple[int, int]:
        return self.x + self.width // 2, self.y + self.height // 2

    @property
    def right(self) -> int:
        return self.x + self.width

    @property
    def bottom(self) -> int:
        return self.y + self.height

    def contains(self, x: int, y: int) -> bool:
        return self.x <= x < self.right and self.y <= y < self.bottom

    def distance(self, x: int, y: int) -> float:
        """Pixels from a point to the rectangle (0 inside); used to tell a near miss from a wild click."""
        dx = max(self.x - x, 0, x - (self.right - 1))
        dy = max(self.y - y, 0, y - (self.bottom - 1))
        return float((dx * dx + dy * dy) ** 0.5)


class Widget(BaseModel):
    """One visible control. `value` is its current content (field text, check state, slider value)."""

    name: str
    role: str
    window: str
    bounds: Bounds
    text: str = ""
    value: Any = None
    enabled: bool = True
    focused: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


class Window(BaseModel):
    """A top-level window. `bounds` is the client area, `frame` includes the window manager's decorations."""

    name: str
    title: str
    bounds: Bounds
    frame: Bounds | None = None
    state: str = "normal"
    focused: bool = False


class WidgetSnapshot(BaseModel):
    """Everything one app shows at one moment; `ready` turns true once every window is mapped and framed."""

    app: str
    seq: int = 0
    synced: int = 0  # the last sync request (see sync_path) the app answered
    ready: bool = False
    windows: list[Window] = Field(default_factory=list)
    widgets: list[Widget] = Field(default_factory=list)

    def window(self, name: str) -> Window:
        for window in self.windows:
            if window.name == name:
                return window
        known = ", ".join(w.name for w in self.windows) or "none"
        raise KeyError(f"app '{self.app}' shows no window named '{name}' (windows: {known})")

    def widget(self, name: str) -> Widget:
        for widget in self.widgets:
            if widget.name == name:
                return widget
        known = ", ".join(w.name for w in self.widgets) or "none"
        raise KeyError(f"app '{self.app}' shows no widget named '{name}' (widgets: {known})")

    def widget_at(self, x: int, y: int) -> Widget | None:
        """The smallest widget containing the point, so a list item wins over its list."""
        hits = [w for w in self.widgets if w.bounds.contains(x, y)]
        return min(hits, key=lambda w: w.bounds.width * w.bounds.height) if hits else None

    def to_text(self) -> str:
        """The widget description an agent reads next to the screenshot, one line per window or widget."""
        if not self.windows:
            return f"(app '{self.app}' shows no windows)"
        lines: list[str] = []
        for window in self.windows:
            flags = " focused" if window.focused else ""
            frame = f" frame={_box(window.frame).removeprefix('bounds=')}" if window.frame else ""
            lines.append(f'window "{window.title}" name={window.name} state={window.state}{flags} '
                         f"{_box(window.bounds)}{frame}")
            for widget in self.widgets:
                if widget.window == window.name:
                    lines.append("  " + _widget_line(widget))
        return "\n".join(lines)


class AppState(BaseModel):
    """The app's real state as it writes it; checkers read only this and files on disk."""

    app: str
    alive: bool = True
    exit_reason: str | None = None
    seq: int = 0
    data: dict[str, Any] = Field(default_factory=dict)


def _box(bounds: Bounds) -> str:
    return f"bounds=(x={bounds.x}, y={bounds.y}, w={bounds.width}, h={bounds.height})"


def _widget_line(widget: Widget) -> str:
    parts = [f"[{widget.role}]", json.dumps(widget.text), f"name={widget.name}"]
    if widget.value is not None and widget.value != widget.text:
        parts.append(f"value={json.dumps(widget.value)}")
    if not widget.enabled:
        parts.append("disabled")
    if widget.focused:
        parts.append("focused")
    parts.append(_box(widget.bounds))
    return " ".join(parts)


def write_json_atomic(path: Path, payload: dict[str, Any]) -> None:
    """Write, flush and rename so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, ensure_ascii=False)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def sync_path(widgets_path: Path) -> Path:
    """Where the environment asks an app to republish: the app answers by echoing the number in `synced`."""
    return widgets_path.with_suffix(".sync")


def read_snapshot(path: Path) -> WidgetSnapshot | None:
    """The last published snapshot, or None before the app has written one."""
    try:
        return WidgetSnapshot.model_validate_json(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None


def read_state(path: Path) -> AppState | None:
    try:
        return AppState.model_validate_json(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return None
