"""`qit bench replay --reexecute`: identical for a deterministic run; divergence reported when a tool changes."""

import json

from tests.platform.conftest import qit


def record(tmp_path):
    (tmp_path / "notes.txt").write_text("The code is 4711.")
    (tmp_path / "tasks.jsonl").write_text(json.dumps(
        {"id": "code", "question": "What is the code in notes.txt?", "answer": "4711", "files": ["notes.txt"]}) + "\n")
    script = tmp_path / "script.jsonl"
    script.write_text("\n".join(json.dumps(x) for x in [
        'Thought: read it\nAction: read_file\nAction Input: {"name": "notes.txt"}',
        "Thought: found\nFinal Answer: 4711",
    ]) + "\n")
    done = qit("bench", "run", "-b", "jsonl", "--root", "tasks.jsonl", "--model-name", f"scripted:{script}",
               "--output", "r.jsonl", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    return json.loads((tmp_path / "r.jsonl").read_text().splitlines()[0])["trace_run_dir"]


def test_reexecute_identical(tmp_path):
    run_dir = record(tmp_path)
    done = qit("bench", "replay", "--run", run_dir, "--reexecute", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "step 1" in done.stdout and "read_file" in done.stdout
    assert "identical: 2 steps reproduced exactly" in done.stdout


def test_reexecute_reports_divergence_when_tool_output_changes(tmp_path):
    run_dir = record(tmp_path)
    (tmp_path / "notes.txt").write_text("The code is 9999.")
    done = qit("bench", "replay", "--run", run_dir, "--reexecute", cwd=tmp_path)
    assert done.returncode == 1
    assert "diverged at step 1: observation differs" in done.stdout and "9999" in done.stdout


def test_reexecute_of_non_benchmark_run_is_a_clear_error(tmp_path):
    from qitos.core import AgentModule, Engine, Task
    from qitos.models.scripted import ScriptedModel

    result = Engine(AgentModule(), ScriptedModel(["Final Answer: x"]), trace_logdir=tmp_path / "runs").run(Task(id="t", objective="o"))
    done = qit("bench", "replay", "--run", result.run_dir, "--reexecute", cwd=tmp_path)
    assert done.returncode == 2 and "not a benchmark run" in done.stderr
