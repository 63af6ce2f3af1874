"""The do-nothing floor beside every success rate: counted over the same task × trials, rows that never ran
said, not guessed; the exports carry it; and each family's rule, asked of the family's own scorer."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from qitos.benchmark.base import LoadOptions
from qitos.results.export import export_results
from qitos.benchmark.floor import FLOOR_KEY, floor_summary, floor_text
from qitos.benchmark.metrics import evaluate_rows, summarize


def row(task: str, trial: int = 0, success: bool | None = False, floor: bool | None = None, tasks: int = 4,
        trials: int = 1) -> dict:
    meta = {} if floor is None else {FLOOR_KEY: floor}
    return {"task_id": task, "trial": trial, "benchmark": "b", "split": "s", "subset": None, "run_spec_ref": "r",
            "model": "m", "recipe": "x", "success": success, "score": None if success is None else float(success),
            "stop_reason": "final" if success is not None else "setup_failed", "selected_tasks": tasks,
            "trials_requested": trials, "metadata": meta}


def test_floor_counts_every_selected_task_trial_scored_or_not() -> None:
    rows = [row("a", success=True, floor=True), row("b", success=None, floor=True),  # unscored: still counts
            row("c", success=True, floor=False), row("d", success=False, floor=False)]
    f = summarize(rows)["do_nothing_floor"]
    assert (f["successes"], f["selected"], f["rate"], f["unknown"]) == (2, 4, 0.5, 0)
    assert (f["scored_successes"], f["scored"]) == (1, 3)  # b is unscored: not in the scored-only floor
    assert floor_text(f) == "0.500   2/4" and floor_text(f, scored=True) == "0.333   1/3"


def test_a_task_with_no_row_is_unknown_and_counted_zero_with_the_ceiling_said() -> None:
    rows = [row("a", success=True, floor=True), row("b", floor=False)]  # 4 selected, c and d never ran
    f = summarize(rows)["do_nothing_floor"]
    assert (f["successes"], f["selected"], f["unknown"], f["rate"], f["rate_max"]) == (1, 4, 2, 0.25, 0.75)
    assert floor_text(f).startswith("≥ 0.250   1/4") and "up to 0.750" in floor_text(f)


def test_trials_of_a_known_task_count_even_without_their_rows() -> None:
    # 2 tasks × 3 trials; task a has one row (its floor flag covers its other two trials), task b two rows
    rows = [row("a", 0, True, True, tasks=2, trials=3), row("b", 0, False, False, tasks=2, trials=3),
            row("b", 1, False, False, tasks=2, trials=3)]
    m = summarize(rows)
    f = m["do_nothing_floor"]
    assert m["selected"] == 6 and (f["successes"], f["selected"], f["unknown"]) == (3, 6, 0)


def test_no_flag_no_floor() -> None:
    assert summarize([row("a", success=True), row("b")])["do_nothing_floor"] is None
    assert floor_summary([], 0, 0) is None


def test_a_duplicate_row_is_not_counted_twice() -> None:
    issues: list[str] = []
    groups = evaluate_rows([row("a", floor=True), row("a", success=True, floor=True), row("b", floor=False)],
                           issues=issues)
    f = groups[0]["metrics"]["do_nothing_floor"]
    assert (f["successes"], f["selected"]) == (1, 4) and len(issues) == 1


def test_markdown_and_csv_exports_carry_the_floor(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [row("a", success=True, floor=True), row("b", floor=False)]))
    md = export_results([path], "md")
    header, _, line = md.splitlines()[:3]
    cells = dict(zip([c.strip() for c in header.split("|")], [c.strip() for c in line.split("|")]))
    assert cells["rate"] == "0.250" and cells["do-nothing floor"] == "≥ 0.250 (1/4), up to 0.750"
    table = list(csv.DictReader(io.StringIO(export_results([path], "csv"))))
    assert [(r["task_id"], r["do_nothing_success"]) for r in table] == [("a", "True"), ("b", "False")]


# -- each family's rule ---------------------------------------------------------------------------------------


def test_jsonl_asks_the_run_scorer_about_no_answer(tmp_path: Path) -> None:
    from qitos.benchmark.jsonl.adapter import JsonlBenchmark

    path = tmp_path / "t.jsonl"
    path.write_text('{"id": "n", "question": "q", "answer": "inf"}\n{"id": "w", "question": "q", "answer": "word"}\n'
                    '{"id": "u", "question": "q"}\n')
    for scorer, expected in (("exact", {"n": False, "w": False, "u": None}),
                             # GAIA's scorer reads an unparseable prediction as +inf: "inf" matches no answer
                             ("gaia", {"n": True, "w": False, "u": None})):
        load = LoadOptions(root=path, options={"scorer": scorer})
        adapter = JsonlBenchmark()
        assert {t.id: adapter.do_nothing_success(t, load) for t in adapter.load_tasks(load)} == expected


def test_desktop_starter_floor_is_its_infeasible_tasks() -> None:
    from qitos.benchmark.desktop.adapter import DesktopAdapter

    adapter, load = DesktopAdapter(), LoadOptions()
    tasks = adapter.load_tasks(load)
    floor = {t.id for t in tasks if adapter.do_nothing_success(t, load)}
    assert floor == {t.id for t in tasks if not adapter.gold(t).feasible} and floor  # FAIL at once succeeds there


def test_gaia_floor_is_the_scorer_on_no_answer() -> None:
    from qitos.benchmark.gaia.floor import do_nothing_success

    assert [do_nothing_success(t) for t in ("17", "a, b", "Paris", "inf", None)] == [False, False, False, True, None]


def test_cybench_floor_is_zero_on_every_task(cybench_data: Path) -> None:
    from qitos.benchmark.cybench.adapter import CybenchAdapter

    for split in ("unguided", "guided"):
        load = LoadOptions(data_dir=cybench_data.parent, split=split)
        adapter = CybenchAdapter()
        tasks = adapter.load_tasks(load)
        assert len(tasks) == 40 and [adapter.do_nothing_success(t, load) for t in tasks] == [False] * 40


@pytest.mark.parametrize("value", [None, "yes", 1])
def test_only_a_bool_flag_counts(value) -> None:
    r = row("a", success=True)
    r["metadata"][FLOOR_KEY] = value
    assert summarize([r])["do_nothing_floor"] is None
