"""Results files written before runs recorded their defaults, compared with a run that records them.

Since runs write in every default (subset, variant, each declared option; see `BenchmarkAdapter.resolve_load`),
a run of the same configuration as an older file has another RunSpec fingerprint: the older one left the defaults
out. Appending to such a file needs `--force` (its rows and the new ones are two fingerprints, so `qit bench eval`
shows two groups); the refusal says that only the recorded defaults differ, or what else changed.
"""

from __future__ import annotations

import copy
from typing import Any, Callable


def with_defaults(old: dict[str, Any], new: dict[str, Any], resolve: Callable[[dict[str, Any]], dict[str, Any]]
                  ) -> dict[str, Any]:
    """`old` (a RunSpec as JSON) with the defaults `new` records filled in where `old` left them out."""
    filled = copy.deepcopy(old)
    meta, new_meta = filled.setdefault("metadata", {}), new.get("metadata") or {}
    try:
        meta["options"] = resolve(meta.get("options") or {})
    except ValueError:  # options this version no longer takes: leave them, the difference shows them
        pass
    if meta.get("variant") is None:
        meta["variant"] = new_meta.get("variant")
    for key in ("benchmark_subset", "benchmark_split"):
        if filled.get(key) is None:
            filled[key] = new.get(key)
    return filled


def predates_defaults(old: dict[str, Any], filled: dict[str, Any]) -> bool:
    """Did filling in the defaults change `old`: was it written before runs recorded them?"""
    return {k: v for k, v in old.items() if k != "fingerprint"} != {k: v for k, v in filled.items() if k != "fingerprint"}
