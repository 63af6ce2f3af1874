"""Upstream's own `DesktopEnv.evaluate` (the data dir's `upstream/desktop_env/desktop_env.py`), run on cases read as
JSON from stdin; writes one score (or the exception) per case as JSON to the output file (upstream prints to stdout).

Run as its own process so upstream's `desktop_env` package never meets QitOS's copy of the evaluators (a lazy
import that resolved to the wrong one would otherwise go unnoticed). `desktop_env` is the data dir's two halves
(`upstream/desktop_env` for the env and controllers, `desktop_env/evaluators` for getters and metrics); stubs stand
in only for what these cases never reach: gymnasium's base class, the VM providers and the setup controller
(the cases have no postconfig). The controller is upstream's `PythonController`, over HTTP to the test VM.

Usage: python upstream_desktop_env.py <osworld data dir> <out.json> < cases.json
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path


def _install_stubs(data: Path) -> None:
    package = types.ModuleType("desktop_env")
    package.__path__ = [str(data / "upstream" / "desktop_env"), str(data / "desktop_env")]
    sys.modules["desktop_env"] = package

    gymnasium = types.ModuleType("gymnasium")
    gymnasium.Env = type("Env", (), {})
    sys.modules.setdefault("gymnasium", gymnasium)

    setup = types.ModuleType("desktop_env.controllers.setup")

    class SetupController:
        def __init__(self, *args, **kwargs) -> None:
            pass

        def setup(self, config) -> None:
            assert not config, "these cases have no postconfig"

    setup.SetupController = SetupController
    sys.modules["desktop_env.controllers.setup"] = setup

    providers = types.ModuleType("desktop_env.providers")
    providers.create_vm_manager_and_provider = lambda *args: (None, None)
    sys.modules["desktop_env.providers"] = providers

    # optional packages the evaluators import at module level and these cases never call (easyocr, borb, ...)
    from qitos.benchmark.osworld.upstream import _MissingFinder

    sys.meta_path.append(_MissingFinder())


def main() -> None:
    data = Path(sys.argv[1])
    _install_stubs(data)
    from desktop_env.controllers.python import PythonController
    from desktop_env.desktop_env import DesktopEnv

    results = []
    for case in json.load(sys.stdin):
        env = DesktopEnv.__new__(DesktopEnv)
        env.vm_ip, env.server_port = "127.0.0.1", case["port"]
        env.chromium_port, env.vlc_port = 9222, 8080
        env.controller = PythonController(vm_ip=env.vm_ip, server_port=env.server_port)
        env.setup_controller = sys.modules["desktop_env.controllers.setup"].SetupController()
        env.cache_dir_base = case["cache_dir"]
        env.action_history = list(case["actions"])
        env._set_task_info({"id": case["id"], "instruction": "x", "config": [], "evaluator": case["evaluator"]})
        try:
            results.append({"score": float(env.evaluate())})
        except Exception as exc:  # noqa: BLE001 - reported to the test, which compares it with QitOS's outcome
            results.append({"error": f"{exc.__class__.__name__}: {exc}"})
    Path(sys.argv[2]).write_text(json.dumps(results))


if __name__ == "__main__":
    main()
