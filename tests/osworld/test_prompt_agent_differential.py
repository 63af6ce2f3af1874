"""`qit bench run --benchmark osworld --recipe prompt-agent` against upstream's own PromptAgent, on the same screens
and the same scripted replies.

21 tasks (2 per app: chrome, gimp, libreoffice_calc, libreoffice_impress, libreoffice_writer, os, thunderbird,
vlc, vs_code, and 3 multi_apps; their setup steps run against the stand-in VM, downloads from a pre-filled cache)
× the 7 observation type / action space pairs upstream's PromptAgent takes (a11y_tree, screenshot,
screenshot_a11y_tree × pyautogui, computer_13, and som × pyautogui) = 147 episodes of at most 3 steps per side;
the 8th pair, som × computer_13, is refused by both. Upstream's side is `upstream_prompt_agent.py` (its
PromptAgent, `DesktopEnv.step` and `PythonController` from the data dir); QitOS's is the real CLI with its
agent side, VM pool and controller client. The stand-in VM (`prompt_agent_desk.Desk`) shows a screen that is a
function of what ran on it (one screen is large enough to be trimmed), and each scripted reply is a function of
the request's messages, so one side's divergence changes what follows.

Compared per episode: every request body (the messages with their image parts, and which parameters are sent:
model, messages, max_tokens, top_p, temperature and nothing else), the actions, the commands sent to `/execute`
(upstream's from the VM's own record; computer_13's with upstream's random MOVE_TO duration and easing masked),
the waits (upstream's recorded, QitOS's from its trace and really slept), and how the episode ended (done, step
budget, or upstream's exception, which QitOS leaves unscored as upstream writes no result). Some pairs run with
other options on both sides (history windows of 1, 0 and 2; other sampling values), and QitOS's RunSpec must
record them resolved.

Counts (deterministic, printed with `-s`): 147 episodes, 315 requests, 292 actions, 198 `/execute` commands (128
pyautogui, 70 from computer_13 actions) and 324 waits equal; endings 62 done (DONE/FAIL), 49 at the step budget,
36 upstream exceptions (computer_13 replies that are not JSON, or actions upstream's step raises on: an unknown
type, a key not in its KEYBOARD_KEYS). About 15 minutes on a loaded 2-core machine (100 s alone).

The edges (`test_failed_calls_and_malformed_actions_are_upstreams`), one episode per scenario of
`prompt_agent_desk.FAILURES` (a 500 once, a 500 on every call, a 502 HTML page, context length exceeded on later
steps, context length exceeded even after upstream's shorter resend, a reply whose content is null) in
a11y_tree × pyautogui and screenshot × computer_13, and of `MALFORMED` (the computer_13 actions upstream runs oddly,
skips or raises on) in computer_13, with `sleep_after_execution` 0.1: 16 episodes, 44 requests (upstream's resends
included), 21 actions, 15 `/execute` commands and 28 waits equal; endings 3 done, 4 at the step budget, 9 upstream
exceptions. About 2 minutes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Callable

import pytest
from prompt_agent_desk import (COMPUTER_13_REPLIES, FAILURES, MALFORMED, PYAUTOGUI_REPLIES, SOM_REPLIES, Desk,
                              edge_answer, reply_for)

from qitos.benchmark.osworld import load_evaluators
from qitos.benchmark.osworld.evaluator import resolve
from qitos.benchmark.osworld.tasks import load_tasks, resolve_examples_dir
from tests.support.openai_server import OpenAIServer, Reply

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
VMS = 4
MAX_STEPS = 3
SIMPLE_SETUP = {"launch", "execute", "command", "activate_window", "open", "close_window", "download"}
PAIRS = [(obs, space) for obs in ("a11y_tree", "screenshot", "screenshot_a11y_tree") for space in ("pyautogui", "computer_13")]
PAIRS.append(("som", "pyautogui"))
# options other than the defaults for some pairs (both sides get them), so the history window is cut (1, 0 and 2
# earlier steps kept) and the sampling options reach the request
OPTIONS = {("screenshot", "pyautogui"): {"max_trajectory_length": 1},
           ("screenshot", "computer_13"): {"max_trajectory_length": 1},
           ("screenshot_a11y_tree", "computer_13"): {"max_trajectory_length": 0},
           ("som", "pyautogui"): {"max_trajectory_length": 2, "temperature": 0.5, "top_p": 1.0, "max_tokens": 700}}
UPSTREAM_ARGS = {"max_tokens": 1500, "top_p": 0.9, "temperature": 1.0, "max_trajectory_length": 3,
                 "sleep_after_execution": 0.0, "max_steps": MAX_STEPS}  # run.py's defaults (max_steps lowered)


@pytest.fixture(scope="module")
def episodes(osworld_data: Path, tmp_path_factory) -> dict[str, Any]:
    """The tasks, and a data dir whose download cache holds their setup files (placeholders)."""
    evaluators = load_evaluators(osworld_data)
    found = load_tasks(resolve_examples_dir(osworld_data), "test_all")
    instructions = Counter(t.instruction for t in found)
    chosen: dict[str, list] = {}
    for task in sorted(found, key=lambda t: t.task_id):
        if ({s.type for s in task.config} <= SIMPLE_SETUP and not task.evaluator.postconfig
                and instructions[task.instruction] == 1 and resolve(task, evaluators).status == "ready"):
            picked = chosen.setdefault(task.domain, [])
            if len(picked) < (3 if task.domain == "multi_apps" else 2):
                picked.append(task)
    tasks = [t for domain in sorted(chosen) for t in chosen[domain]]
    data = tmp_path_factory.mktemp("data")
    (data / "osworld").symlink_to(osworld_data)
    cache = data / "osworld-cache"
    cache.mkdir()
    for task in tasks:
        for step in task.config:
            if step.type == "download":
                for item in step.parameters.files:
                    (cache / hashlib.sha256(item.url.encode()).hexdigest()).write_bytes(b"placeholder " + item.url.encode())
    return {"tasks": tasks, "data": data}


def test_the_tasks_span_the_apps(episodes: dict[str, Any]) -> None:
    domains = Counter(t.domain for t in episodes["tasks"])
    assert len(episodes["tasks"]) == 21 and set(domains) == {
        "chrome", "gimp", "libreoffice_calc", "libreoffice_impress", "libreoffice_writer", "multi_apps", "os",
        "thunderbird", "vlc", "vs_code"}, domains


def _difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values first differ (for a readable failure)."""
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} vs {type(b).__name__}"
    if isinstance(a, dict):
        if set(a) != set(b):
            return f"{path}: keys {sorted(a)} vs {sorted(b)}"
        return next((d for k in a if (d := _difference(a[k], b[k], f"{path}.{k}"))), None)
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} vs {len(b)} items"
        return next((d for i, (x, y) in enumerate(zip(a, b)) if (d := _difference(x, y, f"{path}[{i}]"))), None)
    return None if a == b else f"{path}: {str(a)[:300]!r} vs {str(b)[:300]!r}"


def _replies(observation: str, space: str) -> list[str]:
    return SOM_REPLIES if observation == "som" else PYAUTOGUI_REPLIES if space == "pyautogui" else COMPUTER_13_REPLIES


def _scripted(observation: str, space: str) -> Callable[[dict[str, Any]], Any]:
    return lambda body: Reply(text=reply_for(body["messages"], _replies(observation, space)))


def _by_instruction(server: OpenAIServer, instructions: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Each episode's request bodies in order, told apart by the instruction in the system message."""
    out: dict[str, list[dict[str, Any]]] = {i: [] for i in instructions}
    for request in server.requests:
        system = request["body"]["messages"][0]["content"][0]["text"]
        (instruction,) = [i for i in instructions if system.endswith(": " + i)]
        out[instruction].append(request["body"])
    return out


def _episodes_of(commands: list[list[str]]) -> list[list[list[str]]]:
    """A desk's `python -c` commands split at each episode start (its `/platform` marker)."""
    out: list[list[list[str]]] = []
    for command in commands:
        if command == ["--episode--"]:
            out.append([])
        elif out:
            out[-1].append(command)
    return out


def _qitos_side(episodes: dict[str, Any], tasks: list, observation: str, space: str, answer: Callable,
                options: dict[str, Any], tmp: Path) -> dict[str, Any]:
    server = OpenAIServer(default=answer)
    desks = [Desk(by_code=space == "pyautogui") for _ in range(VMS)]
    with server:
        for desk in desks:
            desk.__enter__()
        try:
            env = {**os.environ, "PYTHONPATH": str(REPO), "QITOS_DATA_DIR": str(episodes["data"]),
                   "QITOS_OSWORLD_CONTROLLER": ",".join(d.url for d in desks)}
            done = subprocess.run(
                [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "--benchmark", "osworld", "--recipe",
                 "prompt-agent", "--task-ids", ",".join(t.task_id for t in tasks), "--model-name", "gpt-4o",
                 "--base-url", server.base_url, "--max-steps", str(MAX_STEPS), "--concurrency", str(VMS),
                 "--option", f"observation_type={observation}", "--option", f"action_space={space}",
                 *[a for k, v in options.items() for a in ("--option", f"{k}={v}")],
                 "--output", "r.jsonl"], cwd=tmp, env=env, capture_output=True, text=True, timeout=300)
        finally:
            for desk in desks:
                desk.__exit__()
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]  # 1: every row ended in an error
    rows = {r["task_id"]: r for r in map(json.loads, (tmp / "r.jsonl").read_text().splitlines())}
    steps: dict[str, list[dict[str, Any]]] = {}
    waits: dict[str, list[list[Any]]] = {}
    for task in tasks:
        run_dir = tmp / rows[task.task_id]["trace_run_dir"]
        spec = json.loads((run_dir / "manifest.json").read_text())["run_spec"]
        options_run = spec["metadata"]["options"]
        assert spec["metadata"]["recipe"] == "prompt-agent" and spec["metadata"]["recipe_upstream"] is True
        assert {k: options_run[k] for k in UPSTREAM_ARGS if k != "max_steps"} == {
            **{k: v for k, v in UPSTREAM_ARGS.items() if k != "max_steps"}, **options}
        assert (options_run["observation_type"], options_run["action_space"]) == (observation, space)
        assert spec["generation"]["max_retries"] == 0 and spec["generation"]["failure_reply"] is True
        events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        steps[task.task_id] = [e["payload"] for e in events if e["kind"] == "env_step"]
        waits[task.task_id] = _waits(events)
    sent = Counter(json.dumps(c) for d in desks for c in d.commands if c != ["--episode--"])
    return {"rows": rows, "steps": steps, "waits": waits, "vm_commands": sent,
            "requests": _by_instruction(server, [t.instruction for t in tasks])}


def _waits(events: list[dict[str, Any]]) -> list[list[Any]]:
    """The waits of QitOS's episode in order: each action's (`step`) and each wait after a failed call
    (`call_llm`), which must really have been slept."""
    out: list[list[Any]] = []
    for event in events:
        payload = event["payload"]
        if event["kind"] == "env_step":
            assert payload["seconds"] >= sum(payload["sleeps"]) - 0.005, payload  # slept, not only planned
            out += [["step", s] for s in payload["sleeps"]]
        elif event["kind"] == "tool_result" and payload["name"] == "failed_call" and "waited" in payload["output"]:
            seconds = float(payload["output"].rsplit("waited ", 1)[1].split(" ")[0])
            assert payload["latency_ms"] >= seconds * 1000, payload
            out.append(["call_llm", seconds])
    return out


def _upstream_side(tasks: list, observation: str, space: str, answer: Callable, options: dict[str, Any],
                   osworld_data: Path, tmp: Path) -> dict[str, Any]:
    server = OpenAIServer(default=answer)
    with server, Desk(by_code=space == "pyautogui") as desk:
        plan = [{"task_id": t.task_id, "instruction": t.instruction, "port": desk.port,
                 "args": {**UPSTREAM_ARGS, **options, "observation_type": observation, "action_space": space}}
                for t in tasks]
        out = tmp / "upstream.json"
        done = subprocess.run([sys.executable, str(HERE / "upstream_prompt_agent.py"), str(osworld_data),
                               server.base_url, str(out)], input=json.dumps(plan), capture_output=True, text=True,
                              timeout=300, env={**os.environ, "PYTHONPATH": str(REPO)})
        assert done.returncode == 0, done.stderr[-3000:]
        commands = _episodes_of(desk.commands)
    results = {r["task_id"]: r for r in json.loads(out.read_text())}
    return {"results": results, "commands": dict(zip([t.task_id for t in tasks], commands)),
            "requests": _by_instruction(server, [t.instruction for t in tasks])}


def _unrandom(command: list[str]) -> list[str]:
    """A command without the duration and easing upstream's controller draws at random for MOVE_TO."""
    return [re.sub(r", [0-9.]+, pyautogui\.ease\w+\)", ", <duration>, <easing>)", part) for part in command]


def _compare(tasks: list, ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[Counter, Counter]:
    """Each episode's requests, actions, /execute commands, waits and ending, QitOS's against upstream's."""
    counts: Counter[str] = Counter()
    ended: Counter[str] = Counter()
    for task in tasks:
        mine, upstream = ours["requests"][task.instruction], theirs["requests"][task.instruction]
        assert mine == upstream, f"{task.task_id}: requests differ at {_difference(mine, upstream)}"
        assert all(set(body) == {"model", "messages", "max_tokens", "top_p", "temperature"} for body in mine)
        row, result, steps = ours["rows"][task.task_id], theirs["results"][task.task_id], ours["steps"][task.task_id]
        # upstream's harness keeps the actions its step returned from; QitOS's trace also has the one it raised on
        assert [s["action"] for s in steps if not s["raised"]] == result["actions"], task.task_id
        assert all(s["raised"] in result["error"] for s in steps if s["raised"]), (task.task_id, result["error"])
        # what reached the VM's /execute, as upstream's controller sends it (its random MOVE_TO timing aside)
        sent = [_unrandom(c) for s in steps for c in s["commands"]]
        assert sent == [_unrandom(c) for c in theirs["commands"][task.task_id]], task.task_id
        assert ours["waits"][task.task_id] == result["sleeps"], task.task_id
        if result["error"]:  # upstream's run.py writes no result.txt: QitOS leaves it unscored
            assert row["stop_reason"] == "error" and row["score"] is None, (task.task_id, row["error"], result["error"])
        else:
            assert row["stop_reason"] == ("env_terminal" if result["done"] else "budget_steps"), (task.task_id, row)
            assert row["metadata"]["status"] != "not_scored", row  # evaluated (the stand-in VM may not score)
        counts.update(episodes=1, requests=len(mine), actions=len(result["actions"]), commands=len(sent),
                      waits=len(result["sleeps"]))
        ended[row["stop_reason"]] += 1
    # what the traces say was sent, the desks received (they also get the scorers' own commands afterwards)
    traced = Counter(json.dumps(c) for steps in ours["steps"].values() for s in steps for c in s["commands"])
    assert not traced - ours["vm_commands"]
    return counts, ended


@pytest.mark.parametrize("observation, space", PAIRS)
def test_prompt_agent_is_upstreams(episodes: dict[str, Any], osworld_data: Path, tmp_path: Path,
                                   observation: str, space: str) -> None:
    (tmp_path / "q").mkdir()
    # every task for the first pair of each action space; every other one (11 of 21, each app still in) for the
    # rest, to keep the suite's time down
    tasks = episodes["tasks"] if (observation, space) in PAIRS[:2] else episodes["tasks"][::2]
    options = OPTIONS.get((observation, space), {})
    ours = _qitos_side(episodes, tasks, observation, space, _scripted(observation, space), options, tmp_path / "q")
    theirs = _upstream_side(tasks, observation, space, _scripted(observation, space), options, osworld_data, tmp_path)
    counts, ended = _compare(tasks, ours, theirs)
    # the scripted replies reach every ending, and the large screen is trimmed where a tree is shown
    assert ended["env_terminal"] and ended["budget_steps"], ended
    if space == "computer_13":
        assert ended["error"], ended
    if observation != "screenshot":
        trimmed = sum("[...]\\n" in json.dumps(b) for bodies in ours["requests"].values() for b in bodies)
        assert trimmed, "no request shows a trimmed tree"
    assert counts["requests"] >= (30 if len(tasks) == len(episodes["tasks"]) else 15)
    window = options.get("max_trajectory_length", 3)
    longest = max(len(b["messages"]) for bodies in ours["requests"].values() for b in bodies)
    assert longest == 2 + 2 * min(window, MAX_STEPS - 1)  # system, kept steps (observation + reply), current
    print(f"{observation} × {space}: {dict(counts)} equal; endings {dict(ended)}")


EDGE_PAIRS = [("a11y_tree", "pyautogui"), ("screenshot", "computer_13")]


@pytest.mark.parametrize("observation, space", EDGE_PAIRS)
def test_failed_calls_and_malformed_actions_are_upstreams(episodes: dict[str, Any], osworld_data: Path,
                                                          tmp_path: Path, observation: str, space: str) -> None:
    """One episode per edge: each failed-call scenario (`FAILURES`) and, for computer_13, each set of malformed
    actions (`MALFORMED`); upstream's step waits `sleep_after_execution` (0.1 s here) after each action."""
    scenarios = FAILURES + (list(MALFORMED) if space == "computer_13" else [])
    tasks = episodes["tasks"][:len(scenarios)]
    by_instruction = dict(zip([t.instruction for t in tasks], scenarios))

    def answer(body: dict[str, Any]) -> Any:
        system = body["messages"][0]["content"][0]["text"]
        (scenario,) = [s for i, s in by_instruction.items() if system.endswith(": " + i)]
        return edge_answer(scenario, space, body)

    options = {"sleep_after_execution": 0.1}
    (tmp_path / "q").mkdir()
    ours = _qitos_side(episodes, tasks, observation, space, answer, options, tmp_path / "q")
    theirs = _upstream_side(tasks, observation, space, answer, options, osworld_data, tmp_path)
    counts, ended = _compare(tasks, ours, theirs)
    results = {by_instruction[t.instruction]: theirs["results"][t.task_id] for t in tasks}
    rows = {by_instruction[t.instruction]: ours["rows"][t.task_id] for t in tasks}
    # each edge does what the issue says upstream does
    assert "content: null" in rows["content null"]["error"] and results["content null"]["error"]
    requests = {by_instruction[i]: len(b) for i, b in ours["requests"].items()}
    assert requests["context length twice"] >= 2
    assert [w for w in results["500 once"]["sleeps"] if w[0] == "call_llm"] == [["call_llm", 5.0]]
    if space == "pyautogui":  # an empty reply is a spent step; the episode goes on to the budget
        assert rows["500 always"]["stop_reason"] == "budget_steps" and requests["500 always"] == MAX_STEPS
        assert requests["context length"] == MAX_STEPS + MAX_STEPS - 1  # each later step resent once
    else:  # upstream's computer_13 parser raises on an empty reply
        assert rows["500 always"]["stop_reason"] == "error" and requests["500 always"] == 1
        assert "Unknown parameters" in results["counts"]["error"] and "KeyError" in results["specials"]["error"]
        assert not results["moves"]["error"] and not results["clicks"]["error"]
        sent = " ".join(c[2] for steps in theirs["commands"].values() for c in steps)
        for code in ("pyautogui.moveTo()", "pyautogui.moveTo(10, 20, ", "button='Left'", "pyautogui.hotkey('')",
                     "pyautogui.typewrite(5)", "clicks=2", "pyautogui.hscroll(2)"):
            assert code in sent, code
        assert [w for w in results["clicks"]["sleeps"]].count(["step", 0.1]) == 5  # WAIT waits twice
    print(f"edges {observation} × {space}: {dict(counts)} equal; endings {dict(ended)}")


def test_som_with_computer_13_is_refused_by_both(episodes: dict[str, Any], osworld_data: Path, tmp_path: Path) -> None:
    task = episodes["tasks"][0]
    with Desk() as desk:
        env = {**os.environ, "PYTHONPATH": str(REPO), "QITOS_DATA_DIR": str(episodes["data"]),
               "QITOS_OSWORLD_CONTROLLER": desk.url}
        done = subprocess.run(
            [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "--benchmark", "osworld", "--task-ids",
             task.task_id, "--model-name", "gpt-4o", "--base-url", "http://127.0.0.1:9/v1", "--option",
             "observation_type=som", "--option", "action_space=computer_13", "--output", "r.jsonl"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        plan = [{"task_id": task.task_id, "instruction": task.instruction, "port": desk.port,
                 "args": {**UPSTREAM_ARGS, "observation_type": "som", "action_space": "computer_13"}}]
        upstream = subprocess.run([sys.executable, str(HERE / "upstream_prompt_agent.py"), str(osworld_data),
                                   "http://127.0.0.1:9/v1", str(tmp_path / "u.json")], input=json.dumps(plan),
                                  capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert upstream.returncode == 0, upstream.stderr[-2000:]
    assert json.loads((tmp_path / "u.json").read_text())[0]["error"] == "ValueError: Invalid action space: computer_13"
    assert done.returncode == 2, done.stdout + done.stderr
    assert "observation_type=som" in done.stderr + done.stdout and "Traceback" not in done.stderr
    assert not (tmp_path / "r.jsonl").exists()
