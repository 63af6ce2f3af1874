"""Both sides: exceptions of the OSWorld adapter: each names what failed so a run report can say why."""

from __future__ import annotations


class OSWorldError(Exception):
    """Base class for every error raised by the OSWorld adapter."""


class TaskFormatError(OSWorldError):
    """A task file (or test_all.json) does not match the expected format; the message names file and field."""


class ControllerError(OSWorldError):
    """The in-VM controller answered with an error (bad status code or a failed command)."""


class ControllerUnreachable(ControllerError):
    """The controller endpoint could not be reached at all (connection refused, DNS, timeout)."""


class UnsupportedSetupStep(OSWorldError):
    """The provider cannot run this setup/postconfig step (e.g. Google Drive needs credentials)."""


class DownloadError(OSWorldError):
    """A file (task input or gold file) could not be downloaded."""
