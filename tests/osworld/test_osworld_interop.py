"""Upstream OSWorld's results layout out of QitOS and back: a real `qit bench run` against the fake in-VM
controller, exported to `<action_space>/<observation>/<model>/<domain>/<id>/{result.txt,traj.jsonl}`, read by
upstream's own `show_result.get_result`, and imported again; the figures are the same all the way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from osworld_fake_controller import FakeController
from test_osworld_bench_cli import GSETTINGS, INFEASIBLE, qit, rows, write_script
from test_osworld_headline import upstream_figures

from qitos.benchmark.osworld.metrics import osworld_metrics


@pytest.fixture(autouse=True)
def _data(osworld_data: Path, monkeypatch) -> None:
    monkeypatch.setenv("QITOS_DATA_DIR", str(osworld_data.parent))


def test_export_show_result_import_round_trip(tmp_path: Path, osworld_data: Path) -> None:
    script = write_script(tmp_path / "script.jsonl", [
        {"action_type": "CLICK", "parameters": {"x": 100, "y": 200}}, {"action_type": "DONE"}])
    with FakeController() as fake:
        fake.command_output = lambda command, shell: "uint32 0\n" if "gsettings" in command else ""
        done = qit("bench", "run", "--benchmark", "osworld", "--recipe", "react-computer-use", "--task-ids", f"{INFEASIBLE},{GSETTINGS}",
                   "--model-name", f"scripted:{script}", "--option", "sleep_after_execution=0", "observation_type=a11y_tree",
                   "--output", "r.jsonl", cwd=tmp_path, controller=fake.url)
    assert done.returncode == 0, done.stdout + done.stderr
    # a task that never ran: no folder upstream, a failure in QitOS's headline
    unscored = {"task_id": "osworld-chrome-never", "benchmark": "osworld", "stop_reason": "requires_unavailable",
                "score": None, "success": None}
    with (tmp_path / "r.jsonl").open("a") as fh:
        fh.write(json.dumps(unscored) + "\n")
    ours = rows(tmp_path / "r.jsonl")
    assert {r["task_id"]: r["score"] for r in ours if r["score"] is not None} == {INFEASIBLE: 0.0, GSETTINGS: 1.0}

    exported = qit("bench", "export", "--input", "r.jsonl", "--format", "osworld", "--output", "results", cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert "wrote 2 task folder(s) (2 with result.txt)" in exported.stdout and "1 row(s) that never ran" in exported.stdout
    model = next(p.name for p in (tmp_path / "results" / "computer_13" / "a11y_tree").iterdir())
    folder = tmp_path / "results" / "computer_13" / "a11y_tree" / model / "os" / GSETTINGS.split("-", 2)[2]
    traj = [json.loads(line) for line in (folder / "traj.jsonl").read_text().splitlines()]
    assert [t["step_num"] for t in traj] == [1, 2] and traj[0]["action"]["action_type"] == "CLICK"
    assert traj[1]["action"] == "DONE" and traj[1]["done"] is True
    assert all((folder / t["screenshot_file"]).is_file() for t in traj)

    # upstream's reader on the export (show_result needs every group it prints: give it the other domains' files)
    for domain in ("libreoffice_calc", "libreoffice_impress", "libreoffice_writer", "vlc", "thunderbird", "chrome",
                   "gimp", "vs_code"):
        extra = tmp_path / "results" / "computer_13" / "a11y_tree" / model / domain / "x"
        extra.mkdir(parents=True)
        (extra / "result.txt").write_text("0.5\n")
    theirs = upstream_figures(osworld_data, tmp_path / "results", action_space="computer_13",
                              observation_type="a11y_tree", model=model)
    padded = ours + [{"task_id": f"osworld-{d}-x", "benchmark": "osworld", "score": 0.5, "success": False,
                      "stop_reason": "env_terminal"} for d in ("libreoffice_calc", "libreoffice_impress",
                                                               "libreoffice_writer", "vlc", "thunderbird", "chrome",
                                                               "gimp", "vs_code")]
    up = osworld_metrics(padded)["upstream"]
    assert (up["runned"], up["success_rate"]) == (theirs["runned"], pytest.approx(theirs["success_rate"]))
    assert theirs["domains"]["os"] == (2, 0.5)

    done = qit("bench", "import", "results", "--format", "osworld", "--output", "imported.jsonl", cwd=tmp_path)
    assert done.returncode == 0 and "imported 10 task folder(s)" in done.stdout, done.stderr
    imported = rows(tmp_path / "imported.jsonl")
    report = qit("bench", "eval", "--input", "imported.jsonl", "--json", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    (group,) = json.loads(report.stdout)["groups"]
    assert group["benchmark_metrics"]["osworld"]["upstream"] == up
    by_id = {r["task_id"]: r for r in imported}
    assert by_id[GSETTINGS]["score"] == 1.0 and by_id[GSETTINGS]["success"] is True and by_id[GSETTINGS]["steps"] == 2
