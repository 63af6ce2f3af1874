"""`--executor ray` on a real multi-node cluster on one machine: a head and worker nodes started by `ray start`
with different custom resources (see ray_nodes.py). One cluster serves the whole module.

- jobs land on the node that has the resource they ask for, and rows and manifests say which node ran them;
- a relative `--root` reaches the nodes (resolved and shipped by the driver);
- a task no node can run is refused before the run: one line, exit 2, nothing written;
- a node whose data dir lacks the benchmark, or holds a different copy, gives clear `setup_failed` rows;
- a worker node killed mid-run: every task still has exactly one row, the lost jobs re-ran on another node;
- the only node with a resource killed mid-run: its jobs end `node_lost` within a bounded time (exit 3), and
  the same command, once a node with the resource is back, runs exactly those again.
"""

from __future__ import annotations

import json
import shutil
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIServer, Reply

from .conftest import qit, rows, write_tasks
from .test_ray_executor import RAY_LINE

pytest.importorskip("ray", reason="install the `ray` extra: pip install 'qitos[ray]'")

from .ray_nodes import RAY_ENV, RayNodes  # noqa: E402

SHARED = Path("/work/shared/data")


def _data_dir() -> Path:
    import os

    return Path(os.environ.get("QITOS_DATA_DIR") or SHARED)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Head (no custom resources), `vm` (osworld_vm and docker slots, a share of the `pool`), and `odd`: a node
    whose data dir holds a modified Tau-Bench retail and no airline."""
    logs = tmp_path_factory.mktemp("ray-logs")
    odd_data = tmp_path_factory.mktemp("odd-data")
    (odd_data / "tau-bench").mkdir()
    shutil.copytree(_data_dir() / "tau-bench" / "retail", odd_data / "tau-bench" / "retail")
    dev = odd_data / "tau-bench" / "retail" / "tasks_dev.json"
    dev.chmod(0o644)
    tasks = json.loads(dev.read_text())
    tasks[0]["outputs"] = [*tasks[0].get("outputs", []), "a different gold output"]
    dev.write_text(json.dumps(tasks))
    nodes = RayNodes(logs)
    try:
        nodes.start_head()
        nodes.start_worker("vm", {"osworld_vm": 2, "docker": 1, "pool": 4}, cpus=1)
        nodes.wait_for(["vm"])  # one at a time: two raylets registering at once overload a 2-core machine
        nodes.start_worker("odd", {"odd_data": 4}, cpus=1, env={"QITOS_DATA_DIR": str(odd_data)})
        nodes.wait_for(["odd"])
        yield nodes
    finally:
        nodes.stop()


def _run(tmp_path: Path, cluster: RayNodes, *args, timeout: int = 300):
    return qit("bench", "run", "--executor", "ray", "--ray-address", cluster.address, *args, cwd=tmp_path,
               env={**RAY_ENV, **cluster.auth}, timeout=timeout)


def test_jobs_land_on_the_node_with_the_resource_and_a_relative_root_works(tmp_path, cluster):
    write_tasks(tmp_path / "t.jsonl", 6)
    done = _run(tmp_path, cluster, "-b", "jsonl", "--root", "t.jsonl", "--runner", "tests.support.runners:oracle",
                "--validator", "--ray-resources", '{"osworld_vm": 1}', "--concurrency", "4", "--output", "r.jsonl")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    out = rows(tmp_path / "r.jsonl")
    assert sorted(r["task_id"] for r in out) == [f"t{i}" for i in range(6)]
    assert all(r["success"] for r in out), [r["error"] for r in out]
    assert {r["placement"]["ray_node_id"] for r in out} == {cluster.ids["vm"]}
    for r in out:
        assert r["placement"]["host"] and r["placement"]["attempt"] == 1
        manifest = json.loads((tmp_path / r["trace_run_dir"] / "manifest.json").read_text())
        assert manifest["placement"]["ray_node_id"] == cluster.ids["vm"]


def test_a_task_no_node_can_run_is_refused_before_the_run(tmp_path, cluster):
    write_tasks(tmp_path / "t.jsonl", 3)
    done = _run(tmp_path, cluster, "-b", "jsonl", "--root", "t.jsonl", "--runner", "tests.support.runners:oracle",
                "--validator", "--ray-resources", "osworld_vm=1,kvm=1", "--output", "r.jsonl")
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "need kvm=1" in errors[0] and "no node of the Ray cluster has it" in errors[0], errors[0]
    assert "ray start --address" in errors[0] and '"kvm": 1' in errors[0], errors[0]
    assert not (tmp_path / "r.jsonl").exists() and not (tmp_path / "runs").exists()
    # Ray's own messages while connecting went to the run's Ray log, removed with the refused run
    assert done.stderr.strip().splitlines() == errors and not (tmp_path / "r.jsonl.ray.log").exists(), done.stderr


def test_a_node_without_the_data_or_with_another_copy_gives_setup_failed_rows(tmp_path, cluster):
    lacking = _run(tmp_path, cluster, "-b", "tau-bench", "--subset", "airline", "--recipe", "oracle", "--limit", "2",
                   "--ray-resources", "odd_data=1", "--output", "airline.jsonl")
    assert lacking.returncode == 1, lacking.stderr[-3000:]  # every row failed to run
    out = rows(tmp_path / "airline.jsonl")
    assert len(out) == 2 and {r["stop_reason"] for r in out} == {"setup_failed"}
    for r in out:
        assert r["placement"]["ray_node_id"] == cluster.ids["odd"]
        assert "cannot load tau-bench from its data dir" in r["error"] and "qit data fetch tau-bench" in r["error"]
    different = _run(tmp_path, cluster, "-b", "tau-bench", "--subset", "retail", "--split", "dev", "--recipe",
                     "oracle", "--limit", "2", "--ray-resources", "odd_data=1", "--output", "retail.jsonl")
    assert different.returncode == 1, different.stderr[-3000:]
    out = rows(tmp_path / "retail.jsonl")
    assert len(out) == 2 and {r["stop_reason"] for r in out} == {"setup_failed"}
    assert all("dataset digest" in r["error"] and "the driver's is" in r["error"] for r in out), out[0]["error"]
    # the same command on nodes with the driver's data runs the tasks
    good = _run(tmp_path, cluster, "-b", "tau-bench", "--subset", "retail", "--split", "dev", "--recipe", "oracle",
                "--limit", "2", "--ray-resources", "pool=1", "--output", "good.jsonl")
    assert good.returncode == 0, good.stderr[-3000:]
    assert [r["success"] for r in rows(tmp_path / "good.jsonl")] == [True, True]


def _answer(body: dict) -> Reply:
    question = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return Reply(text=f"Final Answer: {question.split()[2]}")


def test_a_worker_node_killed_mid_run_leaves_exactly_one_row_per_task(tmp_path, cluster):
    """16 tasks at 1 s model latency over `vm` and `victim` (both have the `pool`); `victim` dies mid-run."""
    import subprocess
    import sys

    cluster.start_worker("victim", {"pool": 4}, cpus=1)
    cluster.wait_for(["victim"])
    write_tasks(tmp_path / "t.jsonl", 16)
    with OpenAIServer(default=_answer, latency_seconds=1.0) as server:
        command = [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root", "t.jsonl",
                   "--model-name", "m", "--base-url", server.base_url, "--api-key-env", "RAY_TEST_KEY",
                   "--executor", "ray", "--ray-address", cluster.address, "--ray-resources", "pool=1",
                   "--concurrency", "8", "--output", "r.jsonl"]
        run = subprocess.Popen(command, cwd=tmp_path, env=cluster.env({"RAY_TEST_KEY": "k"}),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and run.poll() is None:  # a few rows in: jobs are running on both nodes
            if (tmp_path / "r.jsonl").exists() and len(rows(tmp_path / "r.jsonl")) >= 2:
                break
            time.sleep(0.1)
        cluster.kill("victim")
        out, err = run.communicate(timeout=240)
        assert run.returncode == 0, out[-2000:] + err[-3000:]
        seen = Counter(next(m["content"] for m in r["body"]["messages"] if m["role"] == "user")
                       for r in server.requests if not any(m["role"] == "assistant" for m in r["body"]["messages"]))
    result = rows(tmp_path / "r.jsonl")
    assert sorted(r["task_id"] for r in result) == sorted(f"t{i}" for i in range(16)), "a row lost or duplicated"
    assert all(r["stop_reason"] == "final" for r in result), [r["error"] for r in result if r["error"]]
    by_node = Counter(r["placement"]["ray_node_id"] for r in result)
    retried = [r for r in result if r["placement"]["attempt"] == 2]
    assert retried, f"no job was lost with the node (rows per node: {by_node})"
    assert all(r["placement"]["ray_node_id"] == cluster.ids["vm"] and r["placement"]["retried_after"]
               for r in retried), retried[0]["placement"]
    assert max(seen.values()) <= 2 and len(seen) == 16, dict(seen)


def test_the_only_node_with_a_resource_killed_mid_run_ends_its_jobs_then_a_rerun_completes(tmp_path, cluster):
    """`sole` alone has `sole_res`; it dies mid-run: no live node can run the rest, so they end `node_lost` (not
    a wait forever), unscored; with `sole2` up, the same command runs exactly those again."""
    import subprocess
    import sys

    cluster.start_worker("sole", {"sole_res": 4}, cpus=1)
    cluster.wait_for(["sole"])
    write_tasks(tmp_path / "t.jsonl", 6)
    env = cluster.env({"RAY_TEST_KEY": "k", "QITOS_RAY_PLACEMENT_GRACE": "5"})
    with OpenAIServer(default=_answer, latency_seconds=1.0) as server:
        command = [sys.executable, "-m", "qitos.cli.qit", "bench", "run", "-b", "jsonl", "--root", "t.jsonl",
                   "--model-name", "m", "--base-url", server.base_url, "--api-key-env", "RAY_TEST_KEY",
                   "--executor", "ray", "--ray-address", cluster.address, "--ray-resources", "sole_res=1",
                   "--concurrency", "2", "--output", "r.jsonl"]
        run = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and run.poll() is None:
            if (tmp_path / "r.jsonl").exists() and len(rows(tmp_path / "r.jsonl")) >= 1:
                break
            time.sleep(0.1)
        killed_at = time.monotonic()
        cluster.kill("sole")
        out, err = run.communicate(timeout=240)
        took = time.monotonic() - killed_at
        assert run.returncode == 3, out[-2000:] + err[-3000:]
        assert took < 90, took  # node death noticed in seconds, then the 5 s grace
        assert "failed outside the agent" in out and "node_lost" in out, out[-2000:]
        # Ray's own output (connecting; any state dump about the dead node) goes to the run's Ray log, not the terminal
        ray_log = (tmp_path / "r.jsonl.ray.log").read_text()
        assert "Connected to Ray cluster" in ray_log and not RAY_LINE.search(err), err[-3000:]
        assert len(err.splitlines()) < 10, err[-3000:]
        before = rows(tmp_path / "r.jsonl")
        lost = [r for r in before if r["stop_reason"] == "node_lost"]
        assert lost and all(r["success"] is None and "no live node" in r["error"] for r in lost), before
        assert len(before) == 6
        cluster.start_worker("sole2", {"sole_res": 4}, cpus=1)
        cluster.wait_for(["sole2"])
        again = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
        assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
        assert f"{len(lost)} row(s) failed outside the agent (node_lost)" in again.stderr, again.stderr[-2000:]
    result = rows(tmp_path / "r.jsonl")
    assert sorted(r["task_id"] for r in result) == sorted(f"t{i}" for i in range(6)), "a row lost or duplicated"
    assert all(r["stop_reason"] == "final" for r in result), result
