"""Scoring side (rows, never in a run): upstream run.py's results JSON from QitOS rows
(``qit bench export --format tau-bench``, through the adapter's ``export_results``); :mod:`.interop` reads such a
file back in. Kept apart from the adapter and from ``interop`` (which imports the adapter) so neither imports the
other in a circle.
"""

from __future__ import annotations

import json
from pathlib import Path

from qitos.benchmark.floor import FLOOR_KEY
from qitos.results.rows import iter_rows


def export_results(inputs: list[Path]) -> str:
    """Upstream's results JSON from QitOS rows of tau-bench runs (task index, reward, info, traj, trial)."""
    out = []
    for path in inputs:
        for row in iter_rows(path):
            if row.get("benchmark") != "tau-bench":
                continue
            meta = row.get("metadata") or {}
            reward = meta.get("reward", row.get("score") or 0.0)
            info = {k: v for k, v in meta.items() if k not in ("traj", FLOOR_KEY)}  # upstream's info has no floor
            if row.get("error"):
                info["error"] = row["error"]
            out.append({"task_id": int(str(row["task_id"]).rsplit("_", 1)[1]), "reward": float(reward or 0.0),
                        "info": info, "traj": meta.get("traj", []), "trial": int(row.get("trial") or 0)})
    return json.dumps(out, indent=2) + "\n"
