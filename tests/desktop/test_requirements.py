"""Missing tooling is reported with the package to install, before any process starts."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from qitos.benchmark.desktop import DesktopEnv, DesktopUnavailable, get_task, requirements
from qitos.benchmark.desktop import display as display_module
from qitos.benchmark.desktop.apps import module_for


def test_missing_programs_name_their_apt_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    real = shutil.which
    monkeypatch.setattr(display_module.shutil, "which",
                        lambda name: None if name in ("Xvfb", "xdotool") else real(name))
    missing = requirements()
    assert "Xvfb (apt-get install xvfb)" in missing and "xdotool (apt-get install xdotool)" in missing
    before = set(Path(tempfile.gettempdir()).glob("qitos-desk*"))
    with pytest.raises(DesktopUnavailable, match="xvfb"):
        DesktopEnv(get_task("click-apply")).start()
    assert set(Path(tempfile.gettempdir()).glob("qitos-desk*")) == before, "a failed start left files behind"
    with pytest.raises(DesktopUnavailable, match="Xvfb"):
        display_module.VirtualDesktop().start()


def test_unknown_app_and_task_names_are_clear() -> None:
    with pytest.raises(ValueError, match="unknown desktop app 'paint'; known apps: buttons, editor"):
        module_for("paint")
    with pytest.raises(KeyError, match="unknown desktop task 'nope'"):
        get_task("nope")
