"""The two sides of a Tau-Bench run: what crosses to the agent side, what `serve` allows, what the reward trusts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.benchmark.contract import AgentCallRefused
from qitos.benchmark.tau_bench.adapter import TauBenchAdapter
from qitos.benchmark.tau_bench.agent_env import build
from qitos.benchmark.tau_bench.domain import agent_files
from tests.platform.conftest import qit, rows

from .test_replay import AGENT_SCRIPT, write_jsonl

SCRIPTED = {"user_strategy": "scripted", "user_replies": json.dumps(["Hi, I am Yusuf Rossi, zip 19122."])}


def scoring_runtime(tau_data: Path, tmp_path: Path, index: int = 0, subset: str = "retail", options=None):
    adapter = TauBenchAdapter()
    load = LoadOptions(data_dir=tau_data.parent, subset=subset, split="test", options=options or SCRIPTED)
    task = adapter.load_tasks(load)[index]
    return adapter, task, adapter.prepare_scoring_side(task, 0, load, tmp_path)


def test_the_agent_env_carries_no_gold_and_no_tasks_file(tau_data: Path, tmp_path: Path) -> None:
    for subset in ("retail", "airline"):
        for index in range(5):
            adapter, task, runtime = scoring_runtime(tau_data, tmp_path, index, subset)
            spec = adapter.agent_env(task, runtime)
            source = json.loads((tau_data / subset / "tasks_test.json").read_text())[index]
            shipped = json.dumps([spec.model_dump(), adapter.agent_handles(task, runtime)])
            assert source["instruction"] not in shipped
            # texts: upstream's prompts, as upstream; db_digest: the pristine database's (hex, not a place for words)
            public = {k: v for k, v in spec.kwargs.items() if k not in ("texts", "db_digest")}
            assert spec.kwargs["db_digest"] == runtime.scoring.data.pristine.digest()
            assert not any(output in json.dumps(public) for output in source["outputs"])
            assert sorted(spec.files) == sorted(f"tau/{rel}" for rel in agent_files(subset))
            assert all(Path(host).parent.name in (subset, "db") for host in spec.files.values())  # never tasks_*.json

def test_the_agent_side_factory_builds_its_env_from_the_shipped_files(tau_data: Path, tmp_path: Path) -> None:
    adapter, task, runtime = scoring_runtime(tau_data, tmp_path / "scoring")
    spec = adapter.agent_env(task, runtime)
    work = tmp_path / "agent"
    for rel, host in spec.files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_bytes(Path(host).read_bytes())

    class Link:  # the wire: JSON both ways, answered by serve
        def call(self, method, payload=None):
            return json.loads(json.dumps(adapter.serve(task, runtime, method, json.loads(json.dumps(payload or {})))))

    agent_side = build(work, Link(), **spec.kwargs)
    env = agent_side.env
    assert env.domain.pristine is None and env.state_digest() == runtime.scoring.data.pristine.digest()
    assert env.reset() == "Hi, I am Yusuf Rossi, zip 19122."
    gold = adapter.gold(task)
    for action in gold["actions"]:
        env.act(action["name"], action["kwargs"])
    assert env.act("respond", {"content": "Done."}) == "###STOP###" and env.is_terminal()
    outcome = runtime.scoring.outcome(env.final_state())
    assert outcome["reward"] == 1.0 and outcome["done"] and outcome["final_state_digest"] == env.state_digest()


def test_serve_allows_only_the_episode_in_order(tau_data: Path, tmp_path: Path) -> None:
    adapter, task, runtime = scoring_runtime(tau_data, tmp_path)

    def step(action, **kwargs):
        return adapter.serve(task, runtime, "env.step", {"action": action, "kwargs": kwargs})

    with pytest.raises(AgentCallRefused, match="before user.reset"):
        step("respond", content="hello?")
    assert adapter.serve(task, runtime, "user.reset", {}) == {"observation": "Hi, I am Yusuf Rossi, zip 19122."}
    with pytest.raises(AgentCallRefused, match="already started"):
        adapter.serve(task, runtime, "user.reset", {})
    with pytest.raises(AgentCallRefused, match="needs an 'action'"):
        adapter.serve(task, runtime, "env.step", {"name": "respond"})
    with pytest.raises(AgentCallRefused, match="no scoring-side service"):
        adapter.serve(task, runtime, "gold.actions", {})
    with pytest.raises(AgentCallRefused, match="no scoring-side service"):  # the user only through respond actions
        adapter.serve(task, runtime, "user.respond", {"content": "Bye"})
    lookup = step("find_user_id_by_name_zip", first_name="Yusuf", last_name="Rossi", zip="19122")
    assert lookup["observation"] == "yusuf_rossi_9620" and lookup["done"] is False and "db_digest" not in lookup
    assert step("respond", content="Bye") == {"observation": "###STOP###", "source": "user", "done": True,
                                              "ended": True, "written": {}}
    with pytest.raises(AgentCallRefused, match="has ended"):
        step("respond", content="one more thing")
    with pytest.raises(AgentCallRefused, match="has ended"):  # nothing changes the scored state after the end
        step("cancel_pending_order", order_id="#W2378156", reason="no longer needed")
    assert [a.name for a in runtime.scoring.episode.actions] == ["find_user_id_by_name_zip", "respond"]


def test_the_reward_trusts_only_what_the_scoring_side_ran(tau_data: Path, tmp_path: Path) -> None:
    # airline test 2 has a required output ("23553") and writes reservations
    adapter, task, runtime = scoring_runtime(tau_data, tmp_path, index=2, subset="airline")
    gold = adapter.gold(task)
    adapter.serve(task, runtime, "user.reset", {})
    honest = TauBenchAdapter()
    _, _, replay = scoring_runtime(tau_data, tmp_path / "gold", index=2, subset="airline")
    env = build_in_process(honest, replay)
    env.reset()
    for action in gold["actions"]:
        env.act(action["name"], action["kwargs"])
    gold_digest = env.state_digest()
    assert gold_digest == replay.scoring.episode.db.digest() != runtime.scoring.episode.db.digest()
    # any state the agent side returns (the gold one, an end, the outputs said) changes nothing here
    forged = {"written": {"reservations": {}}, "actions": [*gold["actions"], {"name": "respond",
              "kwargs": {"content": "23553"}}], "ended_by": "transfer_to_human_agents", "failure": None}
    outcome = runtime.scoring.outcome(forged)
    assert outcome["done"] is False and outcome["reward"] == 0.0 and outcome["ended_by"] is None
    assert outcome["final_state_digest"] != gold_digest and outcome["actions_taken"] == []
    # only what ran here counts: the user's stop ends it, and the database it scores is this side's (untouched)
    adapter.serve(task, runtime, "env.step", {"action": "respond", "kwargs": {"content": "All done, 23553."}})
    outcome = runtime.scoring.outcome(forged)
    assert outcome["done"] is True and outcome["ended_by"] == "user" and outcome["outputs"] == {"23553": True}
    assert outcome["r_actions"] == 0.0 and outcome["reward"] == 0.0


def test_the_agent_sides_failure_ends_the_episode_on_the_scoring_side(tau_data: Path, tmp_path: Path) -> None:
    adapter, task, runtime = scoring_runtime(tau_data, tmp_path)
    adapter.serve(task, runtime, "user.reset", {})
    assert adapter.serve(task, runtime, "env.fail", {"reason": "agent_protocol_error: not JSON"}) == {
        "failure": "agent_protocol_error: not JSON"}
    with pytest.raises(AgentCallRefused, match="has ended"):
        adapter.serve(task, runtime, "env.step", {"action": "respond", "kwargs": {"content": "Bye"}})
    outcome = runtime.scoring.outcome({"failure": None})
    assert outcome["reward"] == 0.0 and outcome["failure"] == "agent_protocol_error: not JSON"
    # an invalid action fails on the scoring side, as upstream's step raising does
    adapter, task, runtime = scoring_runtime(tau_data, tmp_path / "invalid")
    adapter.serve(task, runtime, "user.reset", {})
    reply = adapter.serve(task, runtime, "env.step", {"action": "respond", "kwargs": {}})
    assert reply["failed"]["type"] == "InvalidActionError" and "content" in runtime.scoring.failure


def build_in_process(adapter: TauBenchAdapter, runtime):
    from qitos.benchmark.tau_bench.agent_env import build_env
    from qitos.benchmark.tau_bench.scoring import DirectLink

    data = runtime.scoring.data
    task = adapter.load_tasks(LoadOptions(data_dir=data.root.parent, subset=data.name, split="test",
                                          task_ids=[f"tau_{data.name}_test_{runtime.scoring.task_index:05d}"]))[0]
    return build_env(data.agent_domain(), None, DirectLink(adapter, task, runtime),
                     **runtime.handles["agent_kwargs"]).env


def test_a_tool_calling_run_is_isolated_and_scores_on_the_scoring_side(tau_data: Path, tmp_path: Path) -> None:
    agent = write_jsonl(tmp_path / "agent.jsonl", AGENT_SCRIPT)
    done = qit("bench", "run", "-b", "tau-bench", "--subset", "retail", "--split", "test", "--task-ids",
               "tau_retail_test_00001", "--recipe", "tool-calling", "--model-name", f"scripted:{agent}",
               "--option", "user_strategy=scripted", "--option", f"user_replies={json.dumps(['Hi, Yusuf Rossi here.'])}",
               "--output", "r.jsonl", cwd=tmp_path, env={"QITOS_DATA_DIR": str(tau_data.parent)})
    assert done.returncode == 0, done.stderr
    [row] = rows(tmp_path / "r.jsonl")
    assert row["success"] is True and row["score"] == 1.0 and row["stop_reason"] == "env_terminal", row
    manifest = json.loads((tmp_path / row["trace_run_dir"] / "manifest.json").read_text())
    checks = {c["check"]: c for c in manifest["official_checks"]}
    assert checks["agent_isolated"]["passed"], checks["agent_isolated"]
    assert manifest["run_spec"]["environment"]["agent_side"] == "bwrap"
    events = [json.loads(line) for line in (tmp_path / row["trace_run_dir"] / "events.jsonl").read_text().splitlines()]
    [reset] = [e for e in events if e["kind"] == "env_reset"]  # written by the scoring side, instruction included
    instruction = json.loads((tau_data / "retail" / "tasks_test.json").read_text())[1]["instruction"]
    assert reset["payload"]["user_instruction"] == instruction
    assert row["metadata"]["last_message"] == AGENT_SCRIPT[-1]


def _marked_tau(tau_data: Path, root: Path) -> Path:
    """A copy of the data whose tasks' instructions and required outputs carry the red team's marker."""
    from tests.trust.test_red_team import MARKER

    for domain in ("retail", "airline"):
        folder = root / domain
        folder.mkdir(parents=True)
        (folder / "db").symlink_to(tau_data / domain / "db")
        for name in ("wiki.md", "rules.json", "tools.json"):
            (folder / name).write_bytes((tau_data / domain / name).read_bytes())
        for source in (tau_data / domain).glob("tasks_*.json"):
            tasks = json.loads(source.read_text())
            for i, task in enumerate(tasks):
                task["instruction"] = f"{MARKER}-{i} {task['instruction']}"
                task["outputs"] = [*task["outputs"], f"{MARKER}-{i}"]
            (folder / source.name).write_text(json.dumps(tasks))
    (root / "upstream").symlink_to(tau_data / "upstream")
    return root


def test_red_team_runner_on_tau_bench_finds_nothing(tau_data: Path, tmp_path: Path) -> None:
    """The third-party red-team runner (tests/trust) against Tau-Bench: no instruction or output read, the
    environment's forged final state and reward change nothing, no row or trace forged."""
    import shutil

    from tests.trust.test_red_team import AGENT, _assert_nothing_worked, _run

    outsider = tmp_path / "agent"
    outsider.mkdir()
    shutil.copy(AGENT, outsider / "red_team_agent.py")
    root = _marked_tau(tau_data, tmp_path / "tau")
    out = _run(outsider, tmp_path, "tau-bench", "--root", str(root), "--subset", "retail", "--limit", "2",
               "--option", "user_strategy=scripted", "--option", f"user_replies={json.dumps(['Hello, I need help.'])}")
    _assert_nothing_worked(out, 2, "tau-bench")
    for row in out:
        assert row["score"] == 0.0 and row["metadata"]["done"] is False  # the forged final state ended nothing
