"""Scoring side: setup and postconfig steps of OSWorld tasks: `{type, parameters}` records, validated per type.

Every step type found in the 369-task test set (and the extra task files shipped next to it) has a model
here; parameters are strict (`extra="forbid"`) so a typo in a task file is reported instead of being
silently ignored. `execute_with_verification` comes from later upstream releases and is accepted so that
newer task files load; no task in the pinned data uses it.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

Command = Union[str, list[str]]
"""A shell string (run with `shell=True`) or an argv list."""


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DownloadFile(_Params):
    url: str
    path: str


class DownloadParams(_Params):
    files: list[DownloadFile] = Field(min_length=1)


class LaunchParams(_Params):
    command: Command
    shell: bool = False


class ExecuteParams(_Params):
    command: Command
    shell: bool = False
    stdout: str | None = None
    """Cache-dir file name that receives the command's stdout (read later by the `cache_file` getter)."""
    stderr: str | None = None


class ExecuteWithVerificationParams(_Params):
    command: Command
    shell: bool = False
    expected_output: str | None = None
    verification: dict[str, Any] | None = None
    max_wait_time: float = 10.0
    check_interval: float = 1.0


class OpenParams(_Params):
    path: str


class WindowParams(_Params):
    window_name: str
    strict: bool = False
    by_class: bool = False


class ChromeOpenTabsParams(_Params):
    urls_to_open: list[str]


class ChromeCloseTabsParams(_Params):
    urls_to_close: list[str]


class SleepParams(_Params):
    seconds: float = Field(ge=0)


class GoogleDriveParams(_Params):
    settings_file: str
    operation: list[str]
    args: list[dict[str, Any]]


class LoginParams(_Params):
    settings_file: str
    platform: str


class HistoryEntry(_Params):
    url: str
    title: str
    visit_time_from_now_in_seconds: float


class UpdateBrowseHistoryParams(_Params):
    history: list[HistoryEntry]


class ChangeWallpaperParams(_Params):
    path: str


class _Step(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DownloadStep(_Step):
    type: Literal["download"]
    parameters: DownloadParams


class LaunchStep(_Step):
    type: Literal["launch"]
    parameters: LaunchParams


class ExecuteStep(_Step):
    type: Literal["execute"]
    parameters: ExecuteParams


class CommandStep(_Step):
    """Upstream alias of `execute` (same parameters, same controller route)."""

    type: Literal["command"]
    parameters: ExecuteParams


class ExecuteWithVerificationStep(_Step):
    type: Literal["execute_with_verification"]
    parameters: ExecuteWithVerificationParams


class OpenStep(_Step):
    type: Literal["open"]
    parameters: OpenParams


class ActivateWindowStep(_Step):
    type: Literal["activate_window"]
    parameters: WindowParams


class CloseWindowStep(_Step):
    type: Literal["close_window"]
    parameters: WindowParams


class ChromeOpenTabsStep(_Step):
    type: Literal["chrome_open_tabs"]
    parameters: ChromeOpenTabsParams


class ChromeCloseTabsStep(_Step):
    type: Literal["chrome_close_tabs"]
    parameters: ChromeCloseTabsParams


class SleepStep(_Step):
    type: Literal["sleep"]
    parameters: SleepParams


class GoogleDriveStep(_Step):
    type: Literal["googledrive"]
    parameters: GoogleDriveParams


class LoginStep(_Step):
    type: Literal["login"]
    parameters: LoginParams


class UpdateBrowseHistoryStep(_Step):
    type: Literal["update_browse_history"]
    parameters: UpdateBrowseHistoryParams


class ChangeWallpaperStep(_Step):
    type: Literal["change_wallpaper"]
    parameters: ChangeWallpaperParams


SetupStep = Annotated[
    Union[
        DownloadStep,
        LaunchStep,
        ExecuteStep,
        CommandStep,
        ExecuteWithVerificationStep,
        OpenStep,
        ActivateWindowStep,
        CloseWindowStep,
        ChromeOpenTabsStep,
        ChromeCloseTabsStep,
        SleepStep,
        GoogleDriveStep,
        LoginStep,
        UpdateBrowseHistoryStep,
        ChangeWallpaperStep,
    ],
    Field(discriminator="type"),
]
"""One setup or postconfig step; pydantic picks the model from `type`."""

STEP_TYPES: tuple[str, ...] = (
    "download",
    "launch",
    "execute",
    "command",
    "execute_with_verification",
    "open",
    "activate_window",
    "close_window",
    "chrome_open_tabs",
    "chrome_close_tabs",
    "sleep",
    "googledrive",
    "login",
    "update_browse_history",
    "change_wallpaper",
)

NEEDS_CREDENTIALS: frozenset[str] = frozenset({"googledrive", "login"})
"""Step types that need account credentials (the upstream `settings/` folder), which QitOS never ships."""
