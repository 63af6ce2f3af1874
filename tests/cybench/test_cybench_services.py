"""CyBench service tasks: the plans QitOS reads from the 25 tasks' files, and a real service task on Docker.

The plan tests need only the data. The Docker tests use the fixture task in fixtures/service_ctf
(see service_fixture.py): its image is built locally from a `docker import`ed busybox, so they run
without a registry; the agent's traffic goes to containers on a bridge network this machine owns.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from qitos.benchmark.cybench.oracle import run_oracle
from qitos.benchmark.cybench.services import ServiceSpec, compose_file_for, plan_for
from qitos.benchmark.cybench.stack import LABEL, ServiceStack, images_missing_locally, remove_stale, running_containers
from qitos.benchmark.cybench.tasks import load_task, load_tasks
from qitos.sandbox.bwrap import BwrapSandbox
from tests.conftest import require_system
from tests.cybench.service_fixture import FIXTURE_FLAG, FIXTURE_PATH, FIXTURE_ROOT, busybox_image

REPO = Path(__file__).resolve().parents[2]

# Read by hand from each task's start_docker.sh and compose file (or init_script.sh / Dockerfile):
# task -> (files, {service: (container_name, [(published, container port)], build context)}, target hosts)
EXPECTED = {
    "noisier-crc": (["start_docker.sh", "docker-compose.yml"],
                    {"noisiercrc": ("noisiercrc", [(9999, 9999)], "challenge")}, ["noisiercrc:9999"]),
    "just-another-pickle-jail": (["start_docker.sh", "compose.yml"], {"just-another-pickle-jail": (
        "just-another-pickle-jail", [(1337, 1337)], "challenge")}, ["just-another-pickle-jail:1337"]),
    "chunky": (["start_docker.sh", "dist/docker-compose.yml"],
               {"blog": ("blog", [], "dist/blog"), "nginx": ("nginx", [], "dist/nginx"),
                "cache": ("cache", [(8080, 8080)], "dist/rcache")}, ["cache:8080"]),
    "[Medium] Were Pickle Phreaks Revenge": (["start_docker.sh", "docker-compose.yml"],
                                             {"pickle_revenge": ("pickle_revenge", [(1337, 1337)], ".")},
                                             ["pickle_revenge:1337"]),
    "WalkingToTheSeaSide": (["start_docker.sh", "docker-compose.yml"],
                            {"alice": ("alice", [(1234, 1337)], "."), "bob": ("bob", [(1235, 1337)], ".")},
                            ["alice:1337", "bob:1337"]),
    "shuffled-aes": (["start_docker.sh", "docker-compose.yml"],
                     {"shuffled-aes": ("shuffled-aes", [(1337, 1337)], ".")}, ["shuffled-aes:1337"]),
    "skilift": (["start_docker.sh", "docker-compose.yml"], {"skilift": ("skilift", [(1337, 1337)], ".")},
                ["skilift:1337"]),
    "avatar": (["start_docker.sh", "docker-compose.yml"], {"avatar": ("avatar", [(1337, 1337)], ".")},
               ["avatar:1337"]),
    "GlacierExchange": (["start_docker.sh", "docker-compose.yml"],
                        {"glacier_exchange": ("glacier_exchange", [(8080, 8080)], ".")}, ["glacier_exchange:8080"]),
    "robust-cbc": (["start_docker.sh", "docker-compose.yml"], {"robust": ("robust", [(1337, 1337)], "challenge")},
                   ["robust:1337"]),
    "ezmaze": (["start_docker.sh", "docker-compose.yml"], {"ezmaze": ("ezmaze", [(9999, 9999)], "challenge")},
               ["ezmaze:9999"]),
    "frog-waf": (["start_docker.sh", "docker-compose.yml"],
                 {"frogwaf": ("frogwaf", [(1337, 1337)], "metadata/challenge")}, ["frogwaf:1337"]),
    "05-motp": (["start_docker.sh", "env/docker-compose.yml"], {"otp": (None, [(8901, 80)], "env/otp")}, ["otp:80"]),
    "[Easy] Labyrinth Linguist": (["start_docker.sh", "compose.yml"], {"web_labyrinth_linguist": (
        "web_labyrinth_linguist", [(1337, 1337)], ".")}, ["web_labyrinth_linguist:1337"]),
    "22-back-to-the-past": (["start_docker.sh", "env/docker-compose.yml"], {"web": ("web", [(8081, 8080)], "env")},
                            ["web:8080"]),
    "[Very Easy] Flag Command": (["start_docker.sh", "docker-compose.yml"],
                                 {"web_flag": ("web_flag", [(1337, 1337)], ".")}, ["web_flag:1337"]),
    "[Easy] Unbreakable": (["start_docker.sh", "docker-compose.yml"],
                           {"unbreakable": ("unbreakable", [(1337, 1337)], ".")}, ["unbreakable:1337"]),
    "[Medium] LockTalk": (["start_docker.sh", "docker-compose.yml"],
                          {"locktalk": ("locktalk", [(1337, 1337)], ".")}, ["locktalk:1337"]),
    "noisy-crc": (["start_docker.sh", "docker-compose.yml"],
                  {"noisy-crc": ("noisy-crc", [(9999, 9999)], "challenge")}, ["noisy-crc:9999"]),
    "eval-me": (["start_docker.sh", "docker-compose.yml"], {"evalme": ("evalme", [(1337, 1337)], "challenge")},
                ["evalme:1337"]),
    "failproof": (["start_docker.sh", "docker-compose.yml"],
                  {"failproof": ("failproof", [(9999, 9999)], "metadata/solution/challenge")}, ["failproof:9999"]),
    # no target_host: randsubware's init_script.sh builds metadata/challenge and runs `my-container`;
    # diffecient ships only challenge/Dockerfile (xinetd, EXPOSE 9999)
    "randsubware": (["init_script.sh"], {"my-container": ("my-container", [], "metadata/challenge")}, []),
    "diffecient": (["challenge/Dockerfile"], {"diffecient": (None, [(None, 9999)], "challenge")}, []),
    # the data copy skipped these build files (see the data README): the plan says what is missing
    "[Very Easy] Delulu": (["start_docker.sh", "docker-compose.yml"], {"delulu": ("delulu", [(1337, 1337)], ".")},
                           ["delulu:1337"]),
    "network-tools": (["start_docker.sh"], {}, ["network-tools:1337"]),
}
NOT_IN_DATA_COPY = {"[Very Easy] Delulu": "build file Dockerfile is not in this data copy",
                    "network-tools": "no compose file in challenge"}


@pytest.fixture(scope="module")
def service_tasks(cybench_data: Path):
    return {t.name: t for t in load_tasks(cybench_data) if t.needs_service}


def test_every_service_task_has_an_expected_plan(service_tasks) -> None:
    assert set(service_tasks) == set(EXPECTED)
    assert sum(bool(t.target_hosts) for t in service_tasks.values()) == 23


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_plan_matches_the_task_files(service_tasks, name: str) -> None:
    task = service_tasks[name]
    files, services, targets = EXPECTED[name]
    plan = plan_for(task)
    assert plan is not None and plan.sources == files
    got = {s.name: (s.container_name, [(p.host, p.container) for p in s.ports],
                    os.path.relpath(s.build_context, task.task_dir.resolve())) for s in plan.services}
    assert got == services
    assert [f"{t.host}:{t.port}" for t in plan.targets] == targets == task.target_hosts
    assert all(t.service for t in plan.targets) == bool(services)  # each name the agent gets is a service's
    if name in NOT_IN_DATA_COPY:
        assert not plan.runnable and NOT_IN_DATA_COPY[name] in "; ".join(plan.missing)
    else:
        assert plan.runnable and plan.missing == [] and plan.ignored == []
    compose, _ = compose_file_for(task.task_dir)
    if compose is not None:  # cross-check against the compose file itself
        raw = yaml.safe_load(compose.read_text())["services"]
        assert set(raw) == set(services)
        for service in plan.services:
            assert [str(p).strip('"') for p in raw[service.name].get("ports", [])] == [
                f"{p.host}:{p.container}" for p in service.ports]


def test_base_images_are_read_from_each_dockerfile(service_tasks, tmp_path: Path) -> None:
    for task in service_tasks.values():
        plan = plan_for(task)
        for service in plan.services if plan.runnable else []:
            dockerfile = (service.build_context / service.dockerfile).read_text()
            froms = [line.split()[1] for line in dockerfile.splitlines() if line.strip().upper().startswith("FROM ")]
            assert service.base_images() and set(service.base_images()) <= set(froms), (task.name, froms)
    (tmp_path / "Dockerfile").write_text("ARG V=3\nFROM --platform=linux/amd64 python:3.11-slim AS build\n"
                                         "FROM build\nfrom scratch\nFROM debian:${V}\nFROM alpine:3.19 as final\n")
    assert ServiceSpec(name="s", build_context=tmp_path).base_images() == ["python:3.11-slim", "alpine:3.19"]


# -- on Docker ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def fixture_task():
    ok, reason = BwrapSandbox.available()
    require_system(ok, f"the bwrap sandbox ({reason})")
    busybox_image()
    return load_task(FIXTURE_ROOT, FIXTURE_PATH)


def _ours() -> list[str]:
    return subprocess.run(["docker", "ps", "-a", "--filter", f"label={LABEL}", "--format", "{{.Names}}"],
                          capture_output=True, text=True, check=True).stdout.split()


def test_bench_list_counts_a_service_task_only_when_its_base_images_are_local(fixture_task) -> None:
    from qitos.benchmark.cybench.availability import _base_images_reason

    assert images_missing_locally(["qitos-test/busybox:1.35", "qitos-test/never-built:0"]) == ["qitos-test/never-built:0"]
    pulled: dict[str, bool] = {}
    assert _base_images_reason(fixture_task, pulled) is None and pulled == {"qitos-test/busybox:1.35": True}
    pulled["qitos-test/busybox:1.35"] = False  # as if the image were not in the engine
    assert "base images are not in the local Docker engine" in _base_images_reason(fixture_task, pulled)


def test_stack_starts_services_by_their_names_and_removes_them(fixture_task, tmp_path: Path) -> None:
    plan = plan_for(fixture_task)
    assert plan is not None and plan.runnable
    first, second = ServiceStack(plan), ServiceStack(plan)  # two runs of one task at once: no clash
    with first, second:
        for stack in (first, second):
            assert stack.volumes == [f"{stack.network}-vault_data"]
            hosts = stack.hosts()
            assert set(hosts) == {"flagserver", "vault"} and hosts["flagserver"] != hosts["vault"]
            assert len(running_containers(stack.key)) == 2
            box = BwrapSandbox(tmp_path / stack.key, network=True, hosts=hosts, timeout_seconds=20)
            try:
                reply = box.run("exec 3<>/dev/tcp/flagserver/1337; read -r l <&3; echo wrong >&3; cat <&3")
                assert reply.exit_code == 0 and "wrong password" in reply.stdout, reply
            finally:
                box.close()
        assert first.hosts()["flagserver"] != second.hosts()["flagserver"]
        ports = subprocess.run(["docker", "port", f"{first.network}-flagserver"], capture_output=True, text=True)
        assert ports.stdout.strip() == f"1337/tcp -> {first.gateway}:1337"  # published on the run's bridge only
    for stack in (first, second):
        assert running_containers(stack.key) == []
        volumes = subprocess.run(["docker", "volume", "ls", "-q", "--filter", f"label={LABEL}={stack.key}"],
                                 capture_output=True, text=True, check=True).stdout.split()
        assert volumes == []  # the named volume (vault_data) was per run and is gone
        gone = subprocess.run(["docker", "network", "inspect", stack.network], capture_output=True)
        assert gone.returncode != 0


def test_oracle_captures_the_flag_from_the_service(fixture_task, tmp_path: Path) -> None:
    result = run_oracle(fixture_task, tmp_path / "oracle", timeout_seconds=60)
    assert result.ran and result.exit_code == 0, result.stderr
    assert result.flag_output == FIXTURE_FLAG and result.flag_correct
    assert not [n for n in _ours() if "flagserver" in n]


def _qit(*args: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "qitos.cli.qit", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


@pytest.mark.parametrize("split", ["unguided", "guided"])
def test_oracle_recipe_runs_the_service_task(fixture_task, tmp_path: Path, split: str) -> None:
    done = _qit("bench", "run", "--benchmark", "cybench", "--root", str(FIXTURE_ROOT), "--recipe", "oracle",
                "--split", split, "--output", "r.jsonl", "--trace-logdir", "runs", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert row["success"] is True and row["score"] == 1.0, row["error"]
    meta = row["metadata"]
    assert set(meta["services"]["hosts"]) == {"flagserver", "vault"}
    assert len(meta["subtasks"]) == (2 if split == "guided" else 1)
    assert all(s["correct"] for s in meta["subtasks"])
    assert len(list((tmp_path / "runs").iterdir())) == 1  # guided: every subtask in one trace
    assert subprocess.run(["docker", "network", "inspect", meta["services"]["network"]],
                          capture_output=True).returncode != 0
    assert not [n for n in _ours() if meta["services"]["network"] in n]


def test_react_agent_reaches_the_service_through_the_sandbox(fixture_task, tmp_path: Path) -> None:
    from qitos.benchmark.base import LoadOptions, RecipeContext
    from qitos.benchmark.cybench.adapter import CybenchAdapter
    from qitos.core.engine import Engine
    from qitos.models.scripted import ScriptedModel

    adapter = CybenchAdapter()
    load = LoadOptions(root=FIXTURE_ROOT, split="unguided")
    (task,) = adapter.load_tasks(load)
    task = task.model_copy(update={"budget": adapter.default_budget()})
    seen: list[str] = []

    def reply(messages) -> str:
        last = str(messages[-1]["content"])
        seen.append(last)
        if len(seen) == 1:
            return "Thought: read the notes\nCommand: cat notes.txt\n<END>"
        if len(seen) == 2:
            password = last.split("password: ")[1].split()[0]
            return ("Thought: talk to the service\nCommand: exec 3<>/dev/tcp/flagserver/1337; read -r l <&3; "
                    f"echo {password} >&3; cat <&3\n<END>")
        flag = next(w for w in last.split() if w.startswith("qitos{"))  # only the service's reply holds it
        return f"Answer: {flag}"

    runtime = adapter.prepare(task, 0, load, tmp_path / "work")
    network = runtime.handles["services"].network
    try:
        assert len(running_containers(runtime.handles["services"].key)) == 2
        model = ScriptedModel(reply)
        agent = adapter.recipes()["react"].build(RecipeContext(task=task, runtime=runtime, load=load, options={},
                                                               make_model=lambda _n: model))
        result = Engine(agent, model, env=runtime.env, trace_logdir=tmp_path / "runs", fsync=False).run(task)
        evaluation = adapter.evaluate(task, result, runtime)
    finally:
        adapter.cleanup(runtime)
    assert evaluation.success and evaluation.prediction == FIXTURE_FLAG
    assert FIXTURE_FLAG in seen[-1] and FIXTURE_FLAG not in "".join(seen[:-1])
    assert not [n for n in _ours() if network in n]


_ORPHAN = """
import sys, time
from qitos.benchmark.cybench.services import plan_for
from qitos.benchmark.cybench.stack import ServiceStack
from qitos.benchmark.cybench.tasks import load_task
stack = ServiceStack(plan_for(load_task(sys.argv[1], sys.argv[2])))
stack.up()
print(stack.key, stack.network, flush=True)
time.sleep(600)
"""


def test_stale_services_of_a_killed_run_are_removed(fixture_task) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN, str(FIXTURE_ROOT), FIXTURE_PATH], stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        key, network = proc.stdout.readline().split()  # type: ignore[union-attr]
        assert len(running_containers(key)) == 2
        assert not [r for r in remove_stale() if network in r]  # its owner is alive: left alone
        assert len(running_containers(key)) == 2
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert len(running_containers(key)) == 2  # SIGKILL: nothing could clean up
    notes: list[str] = []
    with ServiceStack(plan_for(fixture_task), log=notes.append) as next_run:  # the next run removes them first
        assert running_containers(key) == [] and len(running_containers(next_run.key)) == 2
    removed = sorted(n for n in notes if network in n)
    assert removed == sorted(f"removed stale {what} (its QitOS run is gone)" for what in (
        f"container {network}-flagserver", f"container {network}-vault", f"network {network}",
        f"volume {network}-vault_data"))
    deadline = time.monotonic() + 5
    while subprocess.run(["docker", "network", "inspect", network], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline
        time.sleep(0.2)


def test_a_sigkilled_bench_run_leaves_services_the_next_run_removes(fixture_task, tmp_path: Path) -> None:
    script = tmp_path / "model.jsonl"  # the agent's first command blocks, so the run is killed mid-task
    script.write_text(json.dumps("Command: sleep 300\n<END>") + "\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "qitos.cli.qit", "bench", "run", "--benchmark", "cybench",
                             "--root", str(FIXTURE_ROOT), "--recipe", "react", "--model-name", f"scripted:{script}",
                             "--output", "a.jsonl",
                             "--trace-logdir", "runs"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    task_filter = ["--filter", f"label=io.qitos.task={fixture_task.task_id}", "--format", "{{.Names}}"]
    try:
        deadline = time.monotonic() + 120
        while len(orphans := subprocess.run(["docker", "ps", *task_filter], capture_output=True,
                                            text=True).stdout.split()) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the run never brought its services up"
            time.sleep(0.5)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    time.sleep(1)
    still = subprocess.run(["docker", "ps", "-a", *task_filter], capture_output=True, text=True).stdout.split()
    # SIGKILL: the run could not clean up (a CyBench run going beside this test may sweep them first: it removes
    # the services of runs that died, as the next run here must)
    assert set(still) <= set(orphans)
    done = _qit("bench", "run", "--benchmark", "cybench", "--root", str(FIXTURE_ROOT), "--recipe", "oracle",
                "--output", "b.jsonl", "--trace-logdir", "runs", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]
    assert row["success"] is True
    left = subprocess.run(["docker", "ps", "-a", *task_filter], capture_output=True, text=True).stdout.split()
    assert not set(orphans) & set(left) and left == []
