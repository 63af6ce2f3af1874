"""Both sides: HTTP client for the upstream OSWorld in-VM controller (a small Flask server on port 5000 inside the VM).

Routes follow the upstream protocol: `GET /screenshot` (PNG), `POST /execute` ({command, shell} ->
{status, output, error, returncode}), `GET /accessibility` ({"AT": xml}), `POST /file` (form `file_path` ->
bytes), `POST /setup/upload` (multipart `file_path` + `file_data`), the other `/setup/*` routes, `GET
/platform`, `GET /cursor_position`, `POST /screen_size`, `POST /window_size`, `GET /terminal`,
`POST /wallpaper`, `POST /list_directory`. Connection problems raise `ControllerUnreachable` naming the URL.
"""

from __future__ import annotations

from typing import Any

import httpx
from pydantic import BaseModel

from qitos.benchmark.osworld.errors import ControllerError, ControllerUnreachable

DEFAULT_PORT = 5000


class ExecuteResult(BaseModel):
    """Outcome of a command run in the VM."""

    status: str = "success"
    output: str = ""
    error: str = ""
    returncode: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "success" and self.returncode in (0, None)


class ControllerClient:
    """Typed wrapper over the controller routes; one httpx client, reused."""

    def __init__(self, base_url: str, timeout: float = 60.0, transport: httpx.BaseTransport | None = None) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"controller URL must start with http:// or https://, got '{base_url}'")
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout, transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "ControllerClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, *, allow_404: bool = False, **kwargs: Any) -> httpx.Response | None:
        try:
            response = self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise ControllerUnreachable(
                f"OSWorld controller at {self.base_url} is unreachable ({exc.__class__.__name__}: {exc}); "
                "is the VM running and QITOS_OSWORLD_CONTROLLER pointing at it?"
            ) from None
        except httpx.TimeoutException as exc:
            raise ControllerUnreachable(f"OSWorld controller at {self.base_url} timed out on {method} {path}: {exc}") from None
        except httpx.HTTPError as exc:
            raise ControllerError(f"{method} {self.base_url}{path} failed: {exc}") from None
        if allow_404 and response.status_code == 404:
            return None
        if response.status_code >= 400:
            raise ControllerError(f"{method} {self.base_url}{path} returned HTTP {response.status_code}: {response.text[:300]}")
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self._request(method, path, **kwargs)
        assert response is not None
        try:
            return response.json()
        except ValueError:
            raise ControllerError(f"{method} {self.base_url}{path} did not return JSON: {response.text[:200]}") from None

    # -- observation
    def screenshot(self) -> bytes:
        response = self._request("GET", "/screenshot")
        assert response is not None
        return response.content

    def accessibility_tree(self) -> str | None:
        return self._json("GET", "/accessibility").get("AT")

    def terminal_output(self) -> str | None:
        response = self._request("GET", "/terminal", allow_404=True)
        return None if response is None else response.json().get("output")

    def platform(self) -> str:
        response = self._request("GET", "/platform")
        assert response is not None
        return response.text.strip()

    def cursor_position(self) -> tuple[int, int]:
        x, y = self._json("GET", "/cursor_position")[:2]
        return int(x), int(y)

    def screen_size(self) -> dict[str, int]:
        return self._json("POST", "/screen_size")

    def window_size(self, app_class_name: str) -> dict[str, int] | None:
        response = self._request("POST", "/window_size", allow_404=True, data={"app_class_name": app_class_name})
        return None if response is None else response.json()

    def wallpaper(self) -> bytes | None:
        response = self._request("POST", "/wallpaper", allow_404=True)
        return None if response is None else response.content

    def list_directory(self, path: str) -> Any:
        return self._json("POST", "/list_directory", json={"path": path})

    def post_json(self, path: str, body: Any = None) -> Any:
        """POST a JSON body (or nothing) to a route and return its JSON answer."""
        return self._json("POST", path, **({"json": body} if body is not None else {}))

    # -- commands and files
    def execute(self, command: str | list[str], shell: bool = False, timeout: float | None = None) -> ExecuteResult:
        """Run a command in the VM and wait for it (`POST /execute`)."""
        return ExecuteResult.model_validate(self._json("POST", "/execute", json={"command": command, "shell": shell},
                                                        timeout=timeout or self._http.timeout))

    def get_file(self, path: str) -> bytes | None:
        """Bytes of a VM file, or None when it does not exist (the route answers 404)."""
        response = self._request("POST", "/file", allow_404=True, data={"file_path": path})
        return None if response is None else response.content

    def upload_file(self, path: str, data: bytes) -> None:
        self._request("POST", "/setup/upload", data={"file_path": path}, files={"file_data": (path.rsplit("/", 1)[-1], data)})

    # -- setup routes
    def launch(self, command: str | list[str], shell: bool = False) -> None:
        self._request("POST", "/setup/launch", json={"command": command, "shell": shell})

    def setup_execute(self, command: str | list[str], shell: bool = False) -> ExecuteResult:
        return ExecuteResult.model_validate(self._json("POST", "/setup/execute", json={"command": command, "shell": shell}))

    def open_file(self, path: str) -> None:
        self._request("POST", "/setup/open_file", json={"path": path})

    def activate_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        self._request("POST", "/setup/activate_window", json={"window_name": window_name, "strict": strict, "by_class": by_class})

    def close_window(self, window_name: str, strict: bool = False, by_class: bool = False) -> None:
        self._request("POST", "/setup/close_window", json={"window_name": window_name, "strict": strict, "by_class": by_class})

    def change_wallpaper(self, path: str) -> None:
        self._request("POST", "/setup/change_wallpaper", json={"path": path})

    def download_file(self, url: str, path: str) -> None:
        """Let the VM download a URL itself (`POST /setup/download_file`)."""
        self._request("POST", "/setup/download_file", json={"url": url, "path": path})
