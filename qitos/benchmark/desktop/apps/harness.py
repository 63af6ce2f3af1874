"""Scoring side (the task apps' processes): what every task app shares: command line, config, the published widget
description and the state file.

An app builds its Tk widgets, registers the ones an agent may see with `track`, and reports real state with
`set`. The harness refreshes the widget JSON whenever something on screen changed (positions come from Tk in
screen coordinates, frame extents from the window manager), and marks the state file dead on exit, so checkers
always read what the application really holds.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import tkinter as tk
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from qitos.benchmark.desktop.widgets import AppState, Bounds, Widget, WidgetSnapshot, Window, sync_path, write_json_atomic

ChildrenFn = Callable[[], list[Widget]]
_REFRESH_MS = 100
_FRAME_WAIT_MS = 3000


@dataclass
class _Tracked:
    name: str
    role: str
    widget: tk.Misc
    window: str
    text: Callable[[], str]
    value: Callable[[], Any] | None
    children: ChildrenFn | None
    extra: dict[str, Any]


@dataclass
class _TrackedWindow:
    name: str
    toplevel: tk.Wm
    wrapper: str | None = None
    extents: tuple[int, int, int, int] | None = None  # left, right, top, bottom
    extents_for: str = ""
    open: bool = True
    opened_ms: int = 0


class AppHarness:
    """One app process: `harness = AppHarness("form", __doc__)`, build widgets on `harness.root`, `harness.run()`."""

    def __init__(self, app: str, description: str, argv: list[str] | None = None) -> None:
        parser = argparse.ArgumentParser(prog=f"python -m qitos.benchmark.desktop.apps.{app}", description=description)
        parser.add_argument("--state", required=True, type=Path, help="JSON file the app keeps its real state in")
        parser.add_argument("--widgets", type=Path, help="JSON file for the widget description "
                            "(default: next to --state, named <state>.widgets.json)")
        parser.add_argument("--config", default="{}", help="inline JSON object, or a path to a JSON file")
        args = parser.parse_args(argv)
        self.app = app
        self.state_path: Path = args.state
        self.widgets_path: Path = args.widgets or args.state.with_name(args.state.stem + ".widgets.json")
        self.config: dict[str, Any] = _load_config(args.config)
        self.data: dict[str, Any] = {}
        self.root = tk.Tk(className="QitosTask")
        self.root.option_add("*Font", "TkDefaultFont 11")
        self._windows: dict[str, _TrackedWindow] = {}
        self._tracked: list[_Tracked] = []
        self._state_seq = 0
        self._widget_seq = 0
        self._last_published = ""
        self._sync_path = sync_path(self.widgets_path)
        self._synced = 0
        self._clock_ms = 0
        self._exit_reason: str | None = None
        _install_select_all(self.root)
        self.root.protocol("WM_DELETE_WINDOW", lambda: self.quit("window_closed"))
        signal.signal(signal.SIGTERM, lambda *_: self.quit("terminated"))

    # -- building -----------------------------------------------------------------------------------------
    def add_window(self, name: str, toplevel: tk.Wm, title: str, geometry: str | None = None) -> None:
        """Register a top-level window (the root included) under a stable name."""
        toplevel.wm_title(title)
        if geometry:
            toplevel.wm_geometry(geometry)
        self._windows[name] = _TrackedWindow(name=name, toplevel=toplevel, opened_ms=self._clock_ms)

    def window_closed(self, name: str) -> None:
        """Mark a secondary window as closed (call from its WM_DELETE_WINDOW handler before destroying it)."""
        self._windows[name].open = False

    def track(self, name: str, role: str, widget: tk.Misc, window: str, *, text: str | Callable[[], str] = "",
              value: Callable[[], Any] | None = None, children: ChildrenFn | None = None,
              extra: dict[str, Any] | None = None) -> None:
        """Publish a widget; `text` is its label, `value` its current content, `children` its parts (list rows),
        `extra` fixed facts such as a slider's range."""
        text_fn = text if callable(text) else (lambda fixed=text: fixed)
        self._tracked.append(_Tracked(name, role, widget, window, text_fn, value, children, dict(extra or {})))

    def set(self, **values: Any) -> None:
        """Record real state and write the state file at once."""
        self.data.update(values)
        self._write_state(alive=True)

    # -- running --------------------------------------------------------------------------------------------
    def run(self) -> None:
        self._write_state(alive=True)
        self.root.after(50, self._tick)
        try:
            self.root.mainloop()
        finally:
            self._write_state(alive=False)

    def quit(self, reason: str) -> None:
        if self._exit_reason is None:
            self._exit_reason = reason
        for window in self._windows.values():
            window.open = False
        self._write_state(alive=False)
        try:  # nothing is on screen any more; say so rather than leave the last picture
            self._widget_seq += 1
            empty = WidgetSnapshot(app=self.app, seq=self._widget_seq, ready=True)
            write_json_atomic(self.widgets_path, empty.model_dump(mode="json"))
        except OSError:
            pass
        try:
            self.root.destroy()
        except tk.TclError:
            pass

    def _tick(self) -> None:
        self._clock_ms += _REFRESH_MS
        try:
            self._publish()
        except tk.TclError:
            return  # the app is shutting down
        self.root.after(_REFRESH_MS, self._tick)

    # -- publishing -----------------------------------------------------------------------------------------
    def _publish(self) -> None:
        focus = _focused_widget(self.root)
        windows = [w for w in (self._window_record(t, focus) for t in self._windows.values() if t.open) if w]
        shown = {w.name for w in windows}
        widgets: list[Widget] = []
        for item in self._tracked:
            if item.window not in shown or not _viewable(item.widget):
                continue
            widgets.append(Widget(
                name=item.name, role=item.role, window=item.window, bounds=screen_bounds(item.widget),
                text=item.text(), value=item.value() if item.value else None,
                enabled=str(_option(item.widget, "state", "normal")) != "disabled",
                focused=focus is item.widget, extra=item.extra,
            ))
            if item.children:
                widgets.extend(item.children())
        ready = all(t.extents is not None or self._clock_ms - t.opened_ms > _FRAME_WAIT_MS
                    for t in self._windows.values() if t.open) and len(windows) == sum(
            1 for t in self._windows.values() if t.open)
        body = WidgetSnapshot(app=self.app, ready=ready, windows=windows, widgets=widgets)
        text = body.model_dump_json()
        requested = self._sync_request()
        if text != self._last_published or requested != self._synced:
            if text != self._last_published:
                self._widget_seq += 1
            self._last_published, self._synced = text, requested
            body.seq, body.synced = self._widget_seq, requested
            write_json_atomic(self.widgets_path, body.model_dump(mode="json"))

    def _sync_request(self) -> int:
        try:
            return int(self._sync_path.read_text(encoding="ascii") or 0)
        except (OSError, ValueError):
            return self._synced

    def _window_record(self, tracked: _TrackedWindow, focus: tk.Misc | None) -> Window | None:
        top = tracked.toplevel
        if not isinstance(top, tk.Misc) or not top.winfo_exists() or not top.winfo_viewable():
            return None
        client = screen_bounds(top)
        state = str(top.wm_state())
        if tracked.extents is None or tracked.extents_for != state:
            tracked.extents = _frame_extents(top, tracked)
            tracked.extents_for = state if tracked.extents is not None else ""
        frame = None
        if tracked.extents is not None:
            left, right, top_px, bottom = tracked.extents
            frame = Bounds(x=client.x - left, y=client.y - top_px, width=client.width + left + right,
                           height=client.height + top_px + bottom)
        focused = focus is not None and str(focus.winfo_toplevel()) == str(top)
        return Window(name=tracked.name, title=str(top.wm_title()), bounds=client, frame=frame, state=state,
                      focused=focused)

    def _write_state(self, *, alive: bool) -> None:
        self._state_seq += 1
        record = AppState(app=self.app, alive=alive, exit_reason=None if alive else (self._exit_reason or "exited"),
                          seq=self._state_seq, data=self.data)
        try:
            write_json_atomic(self.state_path, record.model_dump(mode="json"))
        except OSError:
            pass  # the environment removed its work directory: nobody is reading any more


# -- helpers -------------------------------------------------------------------------------------------------
def screen_bounds(widget: tk.Misc) -> Bounds:
    return Bounds(x=widget.winfo_rootx(), y=widget.winfo_rooty(), width=widget.winfo_width(),
                  height=widget.winfo_height())


def _viewable(widget: tk.Misc) -> bool:
    try:
        return bool(widget.winfo_exists() and widget.winfo_viewable())
    except tk.TclError:
        return False


def _option(widget: tk.Misc, name: str, default: Any) -> Any:
    try:
        return widget.cget(name)
    except tk.TclError:
        return default


def _focused_widget(root: tk.Tk) -> tk.Misc | None:
    try:
        return root.focus_get()
    except (KeyError, tk.TclError):
        return None


def _frame_extents(top: tk.Misc, tracked: _TrackedWindow) -> tuple[int, int, int, int] | None:
    """Ask the window manager how wide its decorations are (_NET_FRAME_EXTENTS on Tk's wrapper window)."""
    try:
        if tracked.wrapper is None:
            tree = subprocess.run(["xwininfo", "-children", "-id", str(top.winfo_id())], capture_output=True,
                                  text=True, timeout=5).stdout
            for line in tree.splitlines():
                if "Parent window id:" in line:
                    tracked.wrapper = line.split(":", 1)[1].split()[0]
        if tracked.wrapper is None:
            return None
        out = subprocess.run(["xprop", "-id", tracked.wrapper, "_NET_FRAME_EXTENTS"], capture_output=True,
                             text=True, timeout=5).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    if "=" not in out:
        return None
    try:
        left, right, top_px, bottom = (int(v) for v in out.split("=", 1)[1].split(","))
    except ValueError:
        return None
    return left, right, top_px, bottom


def _install_select_all(root: tk.Tk) -> None:
    """Ctrl+A selects everything in text fields, as in every mainstream toolkit (Tk's default is line start)."""
    def entry_select_all(event: "tk.Event[Any]") -> str:
        widget: Any = event.widget
        widget.selection_range(0, "end")
        widget.icursor("end")
        return "break"

    def text_select_all(event: "tk.Event[Any]") -> str:
        widget: Any = event.widget
        widget.tag_add("sel", "1.0", "end-1c")
        return "break"

    for cls in ("Entry", "Spinbox"):
        root.bind_class(cls, "<Control-a>", entry_select_all)
    root.bind_class("Text", "<Control-a>", text_select_all)


def _load_config(raw: str) -> dict[str, Any]:
    text = raw if raw.lstrip().startswith("{") else Path(raw).read_text(encoding="utf-8")
    value = json.loads(text)
    if not isinstance(value, dict):
        raise SystemExit(f"--config must be a JSON object, got {type(value).__name__}")
    return value
