"""Loading and validating the OSWorld task files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from qitos.benchmark.osworld import TaskFormatError, load_task_file, load_tasks
from qitos.benchmark.osworld.config import STEP_TYPES
from qitos.benchmark.osworld.provider import readiness
from qitos.benchmark.osworld.tasks import load_split_index

DOMAIN_COUNTS = {
    "chrome": 46, "gimp": 26, "libreoffice_calc": 47, "libreoffice_impress": 47, "libreoffice_writer": 23,
    "multi_apps": 101, "os": 24, "thunderbird": 15, "vlc": 17, "vs_code": 23,
}


@pytest.fixture(scope="module")
def all_tasks(osworld_data: Path):
    return load_tasks(osworld_data)


def test_all_369_tasks_load_and_validate(all_tasks) -> None:
    assert len(all_tasks) == 369
    assert Counter(t.domain for t in all_tasks) == DOMAIN_COUNTS
    assert len({t.task_id for t in all_tasks}) == 369
    for task in all_tasks:
        assert task.task_id == f"osworld-{task.domain}-{task.id}"
        assert task.instruction.strip()
        assert task.evaluator.metric_specs()


def test_test_small_split(osworld_data: Path) -> None:
    assert len(load_tasks(osworld_data, "test_small")) == 39


def test_step_types_in_data_are_all_modelled(all_tasks) -> None:
    seen = {s.type for t in all_tasks for s in list(t.config) + list(t.evaluator.postconfig)}
    assert seen <= set(STEP_TYPES)
    assert {"download", "launch", "execute", "command", "open", "activate_window", "chrome_open_tabs",
            "chrome_close_tabs", "sleep", "googledrive", "login", "update_browse_history", "close_window"} <= seen


def test_list_valued_evaluators_line_up(all_tasks) -> None:
    multi = [t for t in all_tasks if isinstance(t.evaluator.func, list)]
    assert len(multi) == 27
    for task in multi:
        assert len(task.evaluator.metric_specs()) == len(task.evaluator.func)


def test_filter_by_domain_and_ids(osworld_data: Path) -> None:
    vlc = load_tasks(osworld_data, domains=["vlc"])
    assert len(vlc) == 17 and {t.domain for t in vlc} == {"vlc"}
    first, second = vlc[0], vlc[1]
    picked = load_tasks(osworld_data, ids=[first.task_id, f"vlc/{second.id}"])
    assert [t.id for t in picked] == [first.id, second.id]
    assert [t.id for t in load_tasks(osworld_data, ids=[first.id])] == [first.id]


def test_unknown_domain_split_and_id_are_errors(osworld_data: Path) -> None:
    with pytest.raises(TaskFormatError, match="unknown OSWorld domain"):
        load_tasks(osworld_data, domains=["excel"])
    with pytest.raises(TaskFormatError, match="unknown OSWorld split"):
        load_tasks(osworld_data, split="train")
    with pytest.raises(TaskFormatError, match="not in OSWorld split"):
        load_tasks(osworld_data, ids=["osworld-vlc-nope"])


def test_missing_data_root_is_explained(tmp_path: Path) -> None:
    with pytest.raises(TaskFormatError, match="no OSWorld task data"):
        load_tasks(tmp_path)


def test_split_index_matches_readme(osworld_data: Path) -> None:
    index = load_split_index(osworld_data)
    assert {d: len(ids) for d, ids in index.items()} == DOMAIN_COUNTS


def _good_task() -> dict:
    return {
        "id": "t1", "snapshot": "os", "instruction": "Do it", "source": "", "trajectory": "trajectories/",
        "related_apps": ["os"],
        "config": [{"type": "execute", "parameters": {"command": ["ls"], "shell": False}}],
        "evaluator": {"func": "exact_match", "result": {"type": "vm_command_line", "command": "ls"},
                      "expected": {"type": "rule", "rules": {"expected": "x"}}},
    }


def _write(tmp_path: Path, data: dict, name: str = "t1.json") -> Path:
    path = tmp_path / "os" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("instruction"), "instruction"),
        (lambda d: d["config"].append({"type": "teleport", "parameters": {}}), "config.1"),
        (lambda d: d["config"].append({"type": "download", "parameters": {"files": [{"url": "u"}]}}),
         "config.1.download.parameters.files.0.path"),
        (lambda d: d["config"].append({"type": "sleep", "parameters": {"seconds": 1, "typo": 2}}),
         "config.1.sleep.parameters.typo"),
        (lambda d: d["evaluator"].update(func=["exact_match", "exact_match"], result=[{"type": "rule", "rules": 1}]),
         "evaluator"),
        (lambda d: d["evaluator"].update(result={"type": "vm_file", "path": "/x"}), "evaluator.result"),
        (lambda d: d["evaluator"].update(conj="xor"), "evaluator.conj"),
    ],
)
def test_bad_task_file_names_file_and_field(tmp_path: Path, mutate, field: str) -> None:
    data = _good_task()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(TaskFormatError) as info:
        load_task_file(path)
    message = str(info.value)
    assert str(path) in message
    assert f"field '{field}" in message


def test_invalid_json_and_id_mismatch(tmp_path: Path) -> None:
    bad = tmp_path / "os" / "t1.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    with pytest.raises(TaskFormatError, match=r"t1\.json: invalid JSON at line 1"):
        load_task_file(bad)
    path = _write(tmp_path, _good_task(), "other.json")
    with pytest.raises(TaskFormatError, match="field 'id' is 't1'"):
        load_task_file(path)


def test_good_task_parses_with_string_booleans(tmp_path: Path) -> None:
    data = _good_task()
    data["config"][0]["parameters"]["shell"] = "true"
    task = load_task_file(_write(tmp_path, data))
    assert task.task_id == "osworld-os-t1"
    assert task.config[0].parameters.shell is True
    assert task.evaluator.metric_specs()[0].expected.get("rules") == {"expected": "x"}


def test_without_provider_every_task_requires_unavailable(all_tasks) -> None:
    for task in all_tasks:
        ready = readiness(task, None)
        assert ready.status == "requires_unavailable"
        assert "QITOS_OSWORLD_CONTROLLER" in (ready.reason or "")
