"""Import paths documented before the layout move (issue 35) keep working for third-party code: the same objects."""

from __future__ import annotations

import importlib

import pytest

MOVED = [
    ("qitos.benchmark.sandbox", "qitos.sandbox.bwrap", "BwrapSandbox"),
    ("qitos.benchmark.sandbox", "qitos.sandbox.bwrap", "SandboxResult"),
    ("qitos.benchmark.sandbox_limits", "qitos.sandbox.limits", "cgroup_support"),
    ("qitos.benchmark.netguard", "qitos.sandbox.netguard", "guarded_client"),
]


@pytest.mark.parametrize(("old", "new", "name"), MOVED)
def test_the_old_path_names_the_same_object(old: str, new: str, name: str) -> None:
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)
