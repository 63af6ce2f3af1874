"""CyBench task loading, subsets, ids, and the wall between agent-facing text and gold answers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from qitos.benchmark.cybench.tasks import (
    CybenchTaskError,
    load_task,
    load_tasks,
    read_task_list,
    task_id_for,
)


@pytest.fixture(scope="module")
def all_tasks(cybench_data: Path):
    return load_tasks(cybench_data, "unguided")


def test_loads_all_40_tasks_in_both_splits(cybench_data: Path, all_tasks) -> None:
    assert len(all_tasks) == 40
    guided = load_tasks(cybench_data, "guided")
    assert [t.task_id for t in guided] == [t.task_id for t in all_tasks]
    assert len({t.task_id for t in all_tasks}) == 40
    assert sum(len(t.subtasks) for t in all_tasks) == 171
    categories = Counter(c for t in all_tasks for c in t.categories)
    assert categories == {"crypto": 16, "web": 8, "reverse": 6, "misc": 5, "forensics": 4, "pwn": 2}
    assert all(0 <= t.difficulty <= 5 for t in all_tasks)


def test_task_ids_and_fields(all_tasks) -> None:
    dyn = next(t for t in all_tasks if t.name == "[Very Easy] Dynastic")
    assert dyn.task_id == "cybench_benchmark_hackthebox_cyber-apocalypse-2024_crypto_[Very_Easy]_Dynastic"
    assert dyn.path == "benchmark/hackthebox/cyber-apocalypse-2024/crypto/[Very Easy] Dynastic"
    assert (dyn.categories, dyn.difficulty, dyn.difficulty_name) == (["crypto"], 1, "easy")
    assert dyn.competition == "cyber-apocalypse-2024" and dyn.organization == "hackthebox"
    assert task_id_for("benchmark/a/b c/d") == "cybench_benchmark_a_b_c_d"
    assert all(" " not in t.task_id and "/" not in t.task_id for t in all_tasks)
    walking = next(t for t in all_tasks if t.name == "WalkingToTheSeaSide")
    assert walking.target_hosts == ["alice:1337", "bob:1337"]


def test_service_tasks_are_the_23_with_target_host_plus_two(all_tasks) -> None:
    service = {t.name for t in all_tasks if t.needs_service}
    assert len(service) == 25
    assert {"diffecient", "randsubware"} <= service
    assert all(t.target_hosts for t in all_tasks if t.needs_service and t.name not in ("diffecient", "randsubware"))
    file_only = [t for t in all_tasks if not t.needs_service]
    assert len(file_only) == 15
    assert all(t.service_description() is None for t in file_only)
    assert "target_host is empty" in next(t for t in all_tasks if t.name == "diffecient").service_description()


def test_subset_filters(cybench_data: Path) -> None:
    crypto = load_tasks(cybench_data, subset="crypto")
    assert len(crypto) == 16 and all("crypto" in t.categories for t in crypto)
    both = load_tasks(cybench_data, subset="crypto,web")  # OR within a kind
    assert len(both) == 16 + 8
    easy_crypto = load_tasks(cybench_data, subset="category:crypto,difficulty:1")  # AND across kinds
    assert {t.name for t in easy_crypto} == {"[Very Easy] Primary Knowledge", "[Very Easy] Dynastic", "MissingBits"}
    assert load_tasks(cybench_data, subset="difficulty:easy") == load_tasks(cybench_data, subset="1")
    assert len(load_tasks(cybench_data, subset="file-only")) == 15
    assert len(load_tasks(cybench_data, subset="service,pwn")) == 2
    with pytest.raises(CybenchTaskError, match="not understood"):
        load_tasks(cybench_data, subset="difficulty:impossible")
    with pytest.raises(CybenchTaskError, match="matches no task"):
        load_tasks(cybench_data, subset="quantum")
    with pytest.raises(CybenchTaskError, match="unknown CyBench split"):
        read_task_list(cybench_data, "sideways")  # type: ignore[arg-type]


def _agent_visible_texts(task) -> list[str]:
    texts = []
    for split in ("unguided", "guided"):
        for variant in ("hard", "easy"):
            texts.append(task.agent_prompt(split, variant, files=["a.txt"]))
    texts += [task.subtask_prompt(i, include_hints=True) for i in range(len(task.subtasks))]
    texts.append(json.dumps(task.agent_metadata()))
    return texts


def test_agent_facing_text_never_contains_the_flag(all_tasks) -> None:
    for task in all_tasks:
        flag = task.gold().flag
        for text in _agent_visible_texts(task):
            assert flag not in text, task.task_id


def test_agent_facing_text_has_no_solution_material(all_tasks) -> None:
    for task in all_tasks:
        meta = json.dumps(task.agent_metadata())
        for key in ("answer", "commands", "solution", "annotator_note", "context"):
            assert f'"{key}' not in meta, (task.task_id, key)
        prompt = task.agent_prompt("guided", "hard")
        for sub in task.subtasks:
            for command in sub.commands:
                if len(command) > 25:  # short ones ("ls", "cat source.py") may legitimately appear
                    assert command not in prompt, task.task_id


def test_prompts_and_gold(all_tasks) -> None:
    dyn = next(t for t in all_tasks if t.name == "[Very Easy] Dynastic")
    hard = dyn.agent_prompt("unguided", "hard", files=["output.txt", "source.py"])
    assert "What is the flag?" in hard and "Answer format: ***{" in hard
    assert "contains: output.txt, source.py" in hard and "Answer: <your answer>" in hard
    assert "reverse engineer" not in hard and "reverse engineer" in dyn.agent_prompt("unguided", "easy")
    assert "3 questions" in dyn.agent_prompt("guided")
    q1 = dyn.subtask_prompt(0)
    assert q1.startswith("Question 1 of 3: What is the missing file") and "Hints" not in q1
    assert "Try running source.py." in dyn.subtask_prompt(0, include_hints=True)
    with pytest.raises(IndexError):
        dyn.subtask_prompt(3)
    assert dyn.reveal_message(0).endswith("Its answer is: secret.py")
    with pytest.raises(IndexError, match="may be revealed"):
        dyn.reveal_message(2)  # the flag subtask is never revealed
    gold = dyn.gold()
    assert gold.subtask_answers == ["secret.py", "output.txt", gold.flag]
    assert gold.flag.startswith("HTB{DID_YOU_KNOW") and gold.solution_dir.name == "solution"


def _fake_data(tmp_path: Path, metadata: object) -> Path:
    root = tmp_path / "cybench"
    task = root / "benchmark" / "org" / "comp" / "crypto" / "broken"
    (task / "metadata").mkdir(parents=True)
    (task / "metadata" / "metadata.json").write_text(json.dumps(metadata))
    (root / "task_list.txt").write_text("benchmark/org/comp/crypto/broken\n")
    return root


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"categories": ["crypto"], "difficulty": "hard", "easy_prompt": "", "hard_prompt": "", "subtasks": []},
         "difficulty"),
        ({"categories": ["crypto"], "difficulty": "1", "easy_prompt": "", "hard_prompt": "", "subtasks": []},
         "subtasks"),
        ({"categories": "crypto", "difficulty": "1", "easy_prompt": "", "hard_prompt": "",
          "subtasks": [{"question": "q", "answer": "a"}]}, "categories"),
        ({"categories": ["crypto"], "difficulty": "1", "easy_prompt": "", "hard_prompt": "",
          "subtasks": [{"question": "q"}]}, "subtasks[0]"),
        ({"categories": ["crypto"], "difficulty": "1", "hard_prompt": "",
          "subtasks": [{"question": "q", "answer": "a"}]}, "easy_prompt"),
    ],
)
def test_bad_metadata_names_file_and_field(tmp_path: Path, metadata: object, field: str) -> None:
    root = _fake_data(tmp_path, metadata)
    with pytest.raises(CybenchTaskError) as info:
        load_tasks(root)
    assert "metadata.json" in str(info.value) and field in str(info.value)


def test_missing_data_is_reported(tmp_path: Path) -> None:
    with pytest.raises(CybenchTaskError, match="task_list.txt not found"):
        load_tasks(tmp_path)
    root = _fake_data(tmp_path, {})
    (root / "benchmark/org/comp/crypto/broken/metadata/metadata.json").write_text("{not json")
    with pytest.raises(CybenchTaskError, match="invalid JSON"):
        load_task(root, "benchmark/org/comp/crypto/broken")
    with pytest.raises(CybenchTaskError, match="missing"):
        load_task(root, "benchmark/org/comp/crypto/absent")
