"""OSWorld's own headline beside QitOS's, computed as upstream's `show_result.py` computes it.

The same rows go two ways: QitOS's `osworld_metrics`, and upstream's layout (`<domain>/<id>/result.txt` for each
task upstream's loop would have scored) read by upstream's own `show_result.get_result` from the data dir."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
from pathlib import Path

import pytest

from qitos.benchmark.osworld.metrics import DOMAIN_GROUPS, osworld_metrics


def rows() -> list[dict]:
    """Scores with partial credit in every domain show_result groups, plus rows upstream never counts."""
    out = []
    scores = [1.0, 0.0, 0.5, 1.0, 0.25]
    for d, domain in enumerate(d for group in DOMAIN_GROUPS.values() for d in group):
        for i in range(1 + d % 3):
            score = scores[(d + i) % len(scores)]
            out.append({"task_id": f"osworld-{domain}-task{d}x{i}", "score": score, "success": score == 1.0,
                        "stop_reason": "env_terminal"})
    out.append({"task_id": "osworld-os-unscored", "score": None, "success": False, "stop_reason": "requires_unavailable"})
    out.append({"task_id": "osworld-chrome-crashed", "score": None, "success": False, "stop_reason": "error"})
    out.append({"task_id": "osworld-os-solved", "score": 1.0, "success": True, "stop_reason": "env_terminal"})
    return out


def upstream_figures(osworld_data: Path, results: Path, action_space: str = "pyautogui",
                     observation_type: str = "a11y_tree", model: str = "m") -> dict:
    spec = importlib.util.spec_from_file_location("show_result", osworld_data / "upstream" / "show_result.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        every = module.get_result(action_space, model, observation_type, str(results))
    text = printed.getvalue()
    domains = {d: (int(n), float(rate) / 100) for d, n, rate in
               re.findall(r"Domain: (\S+) Runned: (\d+) Success Rate: ([\d.e+-]+) %", text)}
    groups = {name.lower(): float(rate) / 100 for name, rate in re.findall(r"^(Office|Daily|Professional) Success Rate: ([\d.e+-]+) %", text, re.M)}
    return {"runned": len(every), "success_rate": sum(every) / len(every), "domains": domains, "groups": groups}


def test_upstream_headline_equals_show_result(tmp_path: Path, osworld_data: Path) -> None:
    batch = rows()
    for row in batch:
        if row["score"] is None:
            continue  # upstream's loop wrote no result.txt for a task it could not score
        _, domain, example = row["task_id"].split("-", 2)
        folder = tmp_path / "pyautogui" / "a11y_tree" / "m" / domain / example
        folder.mkdir(parents=True)
        (folder / "result.txt").write_text(f"{row['score']}\n")
    theirs = upstream_figures(osworld_data, tmp_path)
    ours = osworld_metrics(batch)
    up = ours["upstream"]
    assert up["runned"] == theirs["runned"] == 16
    assert up["success_rate"] == pytest.approx(theirs["success_rate"])
    assert {d: (v["runned"], pytest.approx(v["success_rate"])) for d, v in up["by_domain"].items()} == theirs["domains"]
    assert {g: pytest.approx(v) for g, v in up["by_group"].items()} == theirs["groups"]
    # QitOS's own headline counts every row, the unscored ones as 0
    assert ours["rows"] == 18 and ours["coverage"] == pytest.approx(16 / 18)
    assert ours["mean_score"] == pytest.approx(theirs["success_rate"] * 16 / 18)
