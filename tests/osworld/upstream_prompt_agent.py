"""Upstream's own PromptAgent (the data dir's `upstream/mm_agents/agent.py`) and `DesktopEnv.step` with its
`PythonController`, run on episodes read as JSON from stdin; writes what each episode did to the output file.

The loop is `lib_run_single.run_single_example`'s: `predict`, then every action through `env.step(action,
sleep_after_execution)` until one is done, at most `max_steps` predictions (its recording, result files and
`evaluate` are left out: this test compares requests and actions, not scores). An exception ends the episode
as it ends upstream's (`run.py` logs it and writes no result). Upstream's waits (`time.sleep` in `call_llm` and
in `DesktopEnv.step`) are recorded per episode instead of slept.

Stubs stand in for the model SDKs agent.py imports at module level and never calls for a `gpt-*` model
(dashscope, google.generativeai, google.api_core, groq, and backoff where it is not installed), and for what
upstream_desktop_env.py stubs. agent.py's `requests.post` to api.openai.com goes to the loopback server.

Usage: python upstream_prompt_agent.py <osworld data dir> <model base url> <out.json> < episodes.json
"""

from __future__ import annotations

import json
import os
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from upstream_desktop_env import _install_stubs  # noqa: E402


def _stub(name: str, **attrs: object) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _install_agent_stubs() -> None:
    _stub("dashscope")
    google = _stub("google")
    google.__path__ = []  # type: ignore[attr-defined]
    google.generativeai = _stub("google.generativeai")  # type: ignore[attr-defined]
    api_core = _stub("google.api_core")
    api_core.__path__ = []  # type: ignore[attr-defined]
    errors = {n: type(n, (Exception,), {}) for n in ("InvalidArgument", "ResourceExhausted", "InternalServerError",
                                                     "BadRequest")}
    api_core.exceptions = _stub("google.api_core.exceptions", **errors)  # type: ignore[attr-defined]
    _stub("groq", Groq=type("Groq", (), {}))
    try:
        import backoff  # noqa: F401
    except ImportError:
        _stub("backoff", constant=object(), on_exception=lambda *a, **k: (lambda fn: fn))


def main() -> None:
    data, base_url, out = Path(sys.argv[1]), sys.argv[2].rstrip("/"), Path(sys.argv[3])
    _install_stubs(data)
    _install_agent_stubs()
    os.environ.setdefault("OPENAI_API_KEY", "loopback")  # agent.py reads it for its header; the test server ignores it
    from qitos.models.tokenizer import activate

    activate()  # tiktoken's gpt-4 encoding, offline (TIKTOKEN_CACHE_DIR)
    sys.path.insert(0, str(data / "upstream"))
    import requests
    from desktop_env.controllers.python import PythonController
    from desktop_env.desktop_env import DesktopEnv
    from mm_agents import agent as agent_module

    def post(url: str, **kwargs: object):
        assert url == "https://api.openai.com/v1/chat/completions", url
        return requests.post(base_url + "/chat/completions", **kwargs)

    agent_module.requests = types.SimpleNamespace(post=post)  # agent.py's calls only; the controller's stay real
    # upstream's waits (call_llm after a failed call, DesktopEnv.step after an action) are recorded, not slept
    sleeps: list[list] = []
    agent_module.time = types.SimpleNamespace(sleep=lambda s: sleeps.append(["call_llm", s]))
    sys.modules["desktop_env.desktop_env"].time = types.SimpleNamespace(sleep=lambda s: sleeps.append(["step", s]))
    results = []
    for episode in json.load(sys.stdin):
        args = episode["args"]
        actions, error, done = [], None, False
        sleeps.clear()
        try:
            agent = agent_module.PromptAgent(model="gpt-4o", max_tokens=args["max_tokens"], top_p=args["top_p"],
                                             temperature=args["temperature"], action_space=args["action_space"],
                                             observation_type=args["observation_type"],
                                             max_trajectory_length=args["max_trajectory_length"])
            env = DesktopEnv.__new__(DesktopEnv)
            env.controller = PythonController(vm_ip="127.0.0.1", server_port=episode["port"])
            env.action_space = args["action_space"]
            env.require_a11y_tree = args["observation_type"] in ("a11y_tree", "screenshot_a11y_tree", "som")
            env.require_terminal = False
            env.instruction = episode["instruction"]
            env._step_no, env.action_history = 0, []
            agent.reset()
            requests.get(f"http://127.0.0.1:{episode['port']}/platform")  # the test desk starts its episode here
            obs = env._get_obs()
            step_idx = 0
            while not done and step_idx < args["max_steps"]:
                response, step_actions = agent.predict(episode["instruction"], obs)
                for action in step_actions:
                    obs, reward, done, info = env.step(action, args["sleep_after_execution"])
                    actions.append(action)
                    if done:
                        break
                step_idx += 1
        except Exception as exc:  # noqa: BLE001 - upstream's run.py logs it and moves on
            error = f"{type(exc).__name__}: {exc}"
        results.append({"task_id": episode["task_id"], "actions": actions, "done": done, "error": error,
                        "sleeps": list(sleeps)})
    out.write_text(json.dumps(results))


if __name__ == "__main__":
    main()
