"""Scoring side: a private X desktop per task, Xvfb plus a window manager, always torn down.

Every process is started in its own process group and killed as a group, so nothing an app spawns
outlives the desktop. Teardown runs on normal exit, on exceptions and Ctrl-C (context manager), at
interpreter exit (atexit), on SIGTERM/SIGHUP (signal handlers), and if this process dies hard
(the children get SIGTERM from the kernel through PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Callable

from qitos.run.lifetime import die_with_parent
from qitos.trace.liveness import pid_alive

_LOCK_DIR = Path("/tmp")
_SOCKET_DIR = Path("/tmp/.X11-unix")
_OPENBOX_RC = Path("/etc/xdg/openbox/rc.xml")
_FIRST_DISPLAY = 90
_LOGDIR_PREFIX = "qitos-desktop-"


class DesktopError(RuntimeError):
    """The desktop or one of its processes failed (failure tag `execution_environment`)."""


class DesktopUnavailable(DesktopError):
    """A program the desktop needs is not installed (stop reason `requires_unavailable`)."""


def requirements() -> list[str]:
    """What is missing on this machine to run desktop tasks, each with the Debian package that provides it."""
    missing: list[str] = []
    for program, package in (("Xvfb", "xvfb"), ("xdotool", "xdotool"), ("openbox", "openbox"), ("xprop", "x11-utils"),
                             ("xwininfo", "x11-utils")):
        if shutil.which(program) is None:
            missing.append(f"{program} (apt-get install {package})")
    try:
        import tkinter  # noqa: F401
    except ImportError:
        missing.append(
            "tkinter for this Python (Debian python3: apt-get install python3-tk; a pyenv Python must be rebuilt "
            "after apt-get install tk-dev)"
        )
    if not _pillow_can_grab() and shutil.which("import") is None:
        missing.append("a screenshot tool: Pillow built with XCB, or ImageMagick's `import` "
                       "(apt-get install imagemagick)")
    return missing


def _pillow_can_grab() -> bool:
    try:
        from PIL import features

        return bool(features.check("xcb"))
    except ImportError:
        return False


def _display_in_use(number: int) -> bool:
    """A display is taken when its lock file names a live process (a stale lock is Xvfb's to clear)."""
    lock = _LOCK_DIR / f".X{number}-lock"
    try:
        pid = int(lock.read_text().strip() or "0")
    except FileNotFoundError:
        return (_SOCKET_DIR / f"X{number}").exists() and _socket_answers(number)
    except (OSError, ValueError):
        return True
    return pid <= 0 or pid_alive(pid)


def _socket_answers(number: int) -> bool:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(0.5)
        sock.connect(str(_SOCKET_DIR / f"X{number}"))
        return True
    except OSError:
        return False
    finally:
        sock.close()


def _switch_keyboard_to_xtest(display: str) -> None:
    """Press and release Shift once through XTEST, before any window manager or app runs.

    The first XTEST key on a fresh Xvfb switches the core keyboard's source device, and the server announces that as
    a new keyboard mapping (MappingNotify). Openbox answers it by ungrabbing and regrabbing every key binding, one
    round trip at a time: a chord that lands in that gap (alt+F4 as an episode's first keys) reaches the app instead
    and does nothing. CI scored the close-window oracle a failure that way. After this, every key an agent sends
    comes from the same device, and no mapping change follows.
    """
    from Xlib import XK, X
    from Xlib import display as xdisplay
    from Xlib.ext import xtest

    connection = xdisplay.Display(display)
    try:
        shift = connection.keysym_to_keycode(XK.XK_Shift_L)
        xtest.fake_input(connection, X.KeyPress, shift)
        xtest.fake_input(connection, X.KeyRelease, shift)
        connection.sync()
    finally:
        connection.close()


def _sweep_stale_logdirs() -> None:
    """Remove log folders of desktops whose owning process died without cleaning up (e.g. SIGKILL)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{_LOGDIR_PREFIX}*-*"):
        owner = folder.name.removeprefix(_LOGDIR_PREFIX).split("-", 1)[0]
        if owner.isdigit() and int(owner) != os.getpid() and not pid_alive(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)


class VirtualDesktop:
    """Xvfb + openbox on a free display number; use as a context manager.

    `display` (":93") and `env` (os.environ with DISPLAY set) are valid between start and close.
    Start apps with `spawn` so they are part of the teardown. The thread that starts the desktop
    must outlive it (its children are signalled when that thread exits).
    """

    def __init__(self, width: int = 1024, height: int = 768, depth: int = 24, *, window_manager: bool = True,
                 start_timeout: float = 10.0) -> None:
        self.width, self.height, self.depth = width, height, depth
        self.window_manager = window_manager
        self.start_timeout = start_timeout
        self.display: str = ""
        self.number: int | None = None
        self.logdir: Path | None = None
        self._procs: list[subprocess.Popen[bytes]] = []
        self._xvfb: subprocess.Popen[bytes] | None = None
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------------
    def __enter__(self) -> "VirtualDesktop":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("WAYLAND_DISPLAY", "XAUTHORITY")}
        env["DISPLAY"] = self.display
        return env

    def start(self) -> "VirtualDesktop":
        """Start Xvfb (and openbox) and wait until both answer; a desktop starts once."""
        if self.logdir is not None:
            raise DesktopError("this desktop was already started; create a new VirtualDesktop")
        missing = [m for m in requirements() if m.startswith(("Xvfb", "openbox"))]
        if missing:
            raise DesktopUnavailable("cannot start a virtual desktop; missing: " + "; ".join(missing))
        _sweep_stale_logdirs()
        self.logdir = Path(tempfile.mkdtemp(prefix=f"{_LOGDIR_PREFIX}{os.getpid()}-"))
        _register(self)
        try:
            self._start_xvfb()
            _switch_keyboard_to_xtest(self.display)
            if self.window_manager:
                self._start_window_manager()
        except BaseException:
            self.close()
            raise
        return self

    def _start_xvfb(self) -> None:
        attempts = 0
        number = _FIRST_DISPLAY
        while attempts < 20:
            while _display_in_use(number):
                number += 1
            attempts += 1
            # only the socket file in this process's /tmp: no TCP, and no abstract socket, which any process in
            # the same network namespace could reach (an agent side sharing the network must not drive the app)
            proc = self._launch(["Xvfb", f":{number}", "-screen", "0", f"{self.width}x{self.height}x{self.depth}",
                                 "-nolisten", "tcp", "-nolisten", "local", "-noreset"], "xvfb", display=f":{number}")
            if self._wait_for_socket(proc, number):
                self._xvfb, self.number, self.display = proc, number, f":{number}"
                return
            # Lost a race for this number (or Xvfb refused it): forget the process and try the next one.
            self._stop(proc)
            self._procs.remove(proc)
            number += 1
        raise DesktopError(f"could not start Xvfb after {attempts} attempts; last log:\n{self.log_tail('xvfb')}")

    def _wait_for_socket(self, proc: subprocess.Popen[bytes], number: int) -> bool:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False
            lock = _LOCK_DIR / f".X{number}-lock"
            try:
                owner = int(lock.read_text().strip() or "0")
            except (OSError, ValueError):
                owner = 0
            if owner == proc.pid and _socket_answers(number):
                return True
            time.sleep(0.05)
        return False

    def _start_window_manager(self) -> None:
        args = ["openbox", "--sm-disable"]
        if _OPENBOX_RC.exists():
            args += ["--config-file", str(_OPENBOX_RC)]  # the distribution defaults, not the user's tweaks
        proc = self._launch(args, "openbox")
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise DesktopError(f"openbox exited with code {proc.returncode}:\n{self.log_tail('openbox')}")
            probe = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], env=self.env,
                                   capture_output=True, text=True, timeout=5)
            if "window id" in probe.stdout and self._window_manager_answers(deadline):
                return
            time.sleep(0.05)
        raise DesktopError(f"openbox did not become ready in {self.start_timeout:.0f}s")

    def _window_manager_answers(self, deadline: float) -> bool:
        """Whether openbox runs its event loop: it claims the screen (`_NET_SUPPORTING_WM_CHECK`) before it grabs
        its keys and buttons and manages windows, and answers requests only after. A click or alt+F4 sent in
        between reaches the app as if there were no window manager (nothing focused, nothing closed)."""
        from qitos.benchmark.desktop.wm_sync import WindowManagerSync

        sync = WindowManagerSync(self.display)
        try:
            return sync.round_trip(timeout=max(0.1, deadline - time.monotonic()))
        finally:
            sync.close()

    def spawn(self, args: list[str], log_name: str, *, cwd: str | Path | None = None) -> subprocess.Popen[bytes]:
        """Start a program on this desktop in its own process group; it is killed at close."""
        if not self.display or self._closed:
            raise DesktopError("the desktop is not running; start it before spawning programs")
        return self._launch(args, log_name, cwd=cwd)

    def _launch(self, args: list[str], log_name: str, *, display: str | None = None,
                cwd: str | Path | None = None) -> subprocess.Popen[bytes]:
        assert self.logdir is not None
        env = self.env
        if display is not None:
            env["DISPLAY"] = display
        with open(self.logdir / f"{log_name}.log", "ab") as log:
            try:
                proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                        env=env, cwd=cwd, start_new_session=True, preexec_fn=die_with_parent)
            except OSError as exc:
                raise DesktopError(f"could not start {args[0]}: {exc}") from exc
        self._procs.append(proc)
        return proc

    def log_tail(self, log_name: str, lines: int = 20) -> str:
        """The end of one program's log, for error messages."""
        if self.logdir is None:
            return ""
        try:
            text = (self.logdir / f"{log_name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def alive(self) -> bool:
        return self._xvfb is not None and self._xvfb.poll() is None and not self._closed

    def pids(self) -> list[int]:
        """Process ids of everything this desktop started that is still running."""
        return [p.pid for p in self._procs if p.poll() is None]

    def close(self) -> None:
        """Kill every process group (apps, then the window manager, then Xvfb) and wait for each; idempotent."""
        if self._closed:
            return
        self._closed = True
        for proc in reversed(self._procs):
            self._stop(proc)
        self._procs.clear()
        if self.number is not None:
            self._remove_stale_files(self.number)
        if self.logdir is not None:
            shutil.rmtree(self.logdir, ignore_errors=True)
        _unregister(self)

    @staticmethod
    def _stop(proc: subprocess.Popen[bytes], grace: float = 2.0) -> None:
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(proc.pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        # The group leader is reaped; members that ignored SIGTERM get one last SIGKILL.
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _remove_stale_files(self, number: int) -> None:
        """After a SIGKILL Xvfb leaves its lock and socket; remove them only if they are ours."""
        lock = _LOCK_DIR / f".X{number}-lock"
        try:
            owner = int(lock.read_text().strip() or "0")
        except (OSError, ValueError):
            return
        if self._xvfb is not None and owner == self._xvfb.pid:
            for path in (lock, _SOCKET_DIR / f"X{number}"):
                try:
                    path.unlink()
                except OSError:
                    pass


# -- the safety net: close every live desktop at exit or on a termination signal -----------------------
_LIVE: set[VirtualDesktop] = set()
_LIVE_LOCK = threading.RLock()  # re-entrant: a signal handler may run while this thread holds it
_ATEXIT_INSTALLED = False
_PREVIOUS_HANDLERS: dict[int, Any] = {}


def _register(desktop: VirtualDesktop) -> None:
    global _ATEXIT_INSTALLED
    with _LIVE_LOCK:
        _LIVE.add(desktop)
        if not _ATEXIT_INSTALLED:
            atexit.register(close_all)
            _ATEXIT_INSTALLED = True
        _install_signal_handlers()


def _unregister(desktop: VirtualDesktop) -> None:
    with _LIVE_LOCK:
        _LIVE.discard(desktop)


def close_all() -> None:
    """Tear down every desktop this process still has running."""
    with _LIVE_LOCK:
        desktops = list(_LIVE)
    for desktop in desktops:
        desktop.close()


def _install_signal_handlers() -> None:
    """Only the main thread may install handlers; a desktop started elsewhere relies on atexit and PDEATHSIG."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous = signal.getsignal(sig)
        if previous is signal.SIG_IGN or previous is _on_signal:
            continue
        _PREVIOUS_HANDLERS[sig] = previous
        signal.signal(sig, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    close_all()
    previous = _PREVIOUS_HANDLERS.get(signum, signal.SIG_DFL)
    if callable(previous):
        handler: Callable[[int, FrameType | None], Any] = previous
        handler(signum, frame)
        return
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


__all__ = ["DesktopError", "DesktopUnavailable", "VirtualDesktop", "close_all", "requirements"]
