"""Scoring side: what upstream's getters receive as `env`: the parts of OSWorld's `DesktopEnv` they read, backed by QitOS's
controller client.

Upstream getters read `env.controller` (a `PythonController`: files, python commands, accessibility tree,
screen/window size, wallpaper, directory tree, terminal output), `env.vm_ip` with `env.server_port`,
`env.chromium_port` (Chrome DevTools, for Playwright's `connect_over_cdp`) and `env.vlc_port`, `env.vm_platform`
and `env.cache_dir`. `UpstreamController` answers those calls with the same values upstream's controller returns
(None where upstream returns None after its retries), so a metric receives exactly the inputs upstream gives it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from qitos.benchmark.osworld.controller import ControllerClient
from qitos.benchmark.osworld.errors import ControllerError, ControllerUnreachable

# upstream DesktopEnv defaults (server 5000, Chrome DevTools 9222, VNC 8006, VLC HTTP 8080)
DEFAULT_PORTS = {"server": 5000, "chromium": 9222, "vnc": 8006, "vlc": 8080}
PYTHON_PREFIX = "import pyautogui; import time; pyautogui.FAILSAFE = False; {command}"


@dataclass(frozen=True)
class VMAddress:
    """Where a VM's services listen, as upstream's providers report them (`ip:server:chromium:vnc:vlc`)."""

    ip: str
    server_port: int = DEFAULT_PORTS["server"]
    chromium_port: int = DEFAULT_PORTS["chromium"]
    vnc_port: int = DEFAULT_PORTS["vnc"]
    vlc_port: int = DEFAULT_PORTS["vlc"]

    @classmethod
    def from_controller_url(cls, url: str, **ports: int) -> "VMAddress":
        parsed = urlparse(url)
        return cls(ip=parsed.hostname or "localhost", server_port=parsed.port or DEFAULT_PORTS["server"], **ports)

    @property
    def controller_url(self) -> str:
        return f"http://{self.ip}:{self.server_port}"


class UpstreamController:
    """Upstream `PythonController`'s getter-facing methods over a QitOS `ControllerClient`."""

    def __init__(self, client: ControllerClient) -> None:
        self.client = client

    def get_file(self, file_path: str) -> bytes | None:
        try:
            return self.client.get_file(file_path)
        except ControllerUnreachable:
            raise
        except ControllerError:
            return None

    def execute_python_command(self, command: str) -> dict[str, Any] | None:
        """`python -c "<pyautogui prefix>; command"` in the VM; the route's JSON, or None on an HTTP error."""
        try:
            return self.client.execute(["python", "-c", PYTHON_PREFIX.format(command=command)], shell=False,
                                       timeout=90).model_dump()
        except ControllerUnreachable:
            raise
        except ControllerError:
            return None

    def _optional(self, call: Any, *args: Any) -> Any:
        try:
            return call(*args)
        except ControllerUnreachable:
            raise
        except (ControllerError, ValueError, KeyError):
            return None

    def get_accessibility_tree(self) -> str | None:
        return self._optional(self.client.accessibility_tree)

    def get_terminal_output(self) -> str | None:
        return self._optional(self.client.terminal_output)

    def get_vm_screen_size(self) -> Any:
        return self._optional(self.client.screen_size)

    def get_vm_window_size(self, app_class_name: str) -> Any:
        return self._optional(self.client.window_size, app_class_name)

    def get_vm_wallpaper(self) -> bytes | None:
        return self._optional(self.client.wallpaper)

    def get_vm_desktop_path(self) -> str | None:
        return self._optional(lambda: self.client.post_json("/desktop_path")["desktop_path"])

    def get_vm_directory_tree(self, path: str) -> Any:
        return self._optional(lambda: self.client.post_json("/list_directory", {"path": path})["directory_tree"])

    def get_vm_platform(self) -> str:
        result = self.execute_python_command("import platform; print(platform.system())")
        if result is None:
            raise ControllerError("could not read the VM platform (python command failed)")
        return str(result["output"]).strip()


class UpstreamEnv:
    """The `env` argument of upstream getters for one task evaluation."""

    def __init__(self, client: ControllerClient, address: VMAddress, cache_dir: str) -> None:
        self.controller = UpstreamController(client)
        self.vm_ip = address.ip
        self.server_port = address.server_port
        self.chromium_port = address.chromium_port
        self.vnc_port = address.vnc_port
        self.vlc_port = address.vlc_port
        self.cache_dir = cache_dir
        self._platform: str | None = None

    @property
    def vm_platform(self) -> str:
        if self._platform is None:
            self._platform = self.controller.get_vm_platform()
        return self._platform

    @property
    def vm_screen_size(self) -> Any:
        return self.controller.get_vm_screen_size()
