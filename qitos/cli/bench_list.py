"""`qit bench list`: each benchmark's splits, task counts, recipes, options and requirements; one short line per
benchmark, or everything (`--details`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rich.table import Table

from .bench_view import console


def list_benchmarks(data_dir: Path | None) -> list[dict[str, Any]]:
    from qitos.benchmark.base import LoadOptions
    from qitos.benchmark.registry import available, get_adapter

    load = LoadOptions(**({"data_dir": data_dir} if data_dir else {}))
    out = []
    for name in sorted(available()):
        entry: dict[str, Any] = {"name": name}
        try:
            adapter = get_adapter(name)
            entry["description"] = adapter.description
            entry["options"] = _options_of(adapter)  # before what needs the data: listed without it too
            entry["splits"] = adapter.splits(load)
            reqs = adapter.requirements(load)
            entry["requirements"] = [r.model_dump() for r in reqs]
            entry["can_run"] = all(r.ok for r in reqs)
            recipes = adapter.recipes()
            entry["recipes"] = list(recipes)
            # which recipe is the benchmark's reference baseline as upstream runs it (True), QitOS's own (False)
            entry["recipes_upstream"] = {name: r.upstream for name, r in recipes.items()}
            entry["runnable"] = adapter.runnable_here(load)
            subsets = adapter.subset_splits(load)
            if subsets:  # splits differ per subset (Tau-Bench's domains): each subset's, and what runs here
                entry["subsets"] = {subset: {"splits": splits, "runnable": adapter.runnable_here(
                    load.model_copy(update={"subset": subset}))} for subset, splits in subsets.items()}
                entry["default_subset"] = adapter.default_subset
        except Exception as exc:  # noqa: BLE001 - one broken family must not hide the others
            entry.update(can_run=False, error=f"{type(exc).__name__}: {exc}")
        out.append(entry)
    return out


def _options_of(adapter) -> list[dict[str, Any]] | None:
    """The declared `--option` keys (name, type, default, range, help); None when the adapter declares none."""
    from qitos.benchmark.options import describe_options

    model = adapter.options_model
    return None if model is None else [o.as_dict() for o in describe_options(model)]


def _splits_text(entry: dict[str, Any]) -> str:
    """`test (115)`, or `unguided (38/40)` when only some tasks of a split can run here; per subset where the
    splits differ by subset (`retail: test (115), ...; airline: test (50)`)."""
    if entry.get("subsets"):
        return "; ".join(f"{name}: {_split_counts(s.get('splits') or {}, s.get('runnable') or {})}"
                         for name, s in entry["subsets"].items())
    return _split_counts(entry.get("splits") or {}, entry.get("runnable") or {})


def _split_counts(splits: dict[str, int | None], runnable: dict[str, Any]) -> str:
    def one(split: str, count: int | None) -> str:
        if split in runnable and runnable[split].get("runnable") != count:
            return f"{split} ({runnable[split]['runnable']}/{count})"
        return f"{split} ({count if count is not None else '?'})"

    return ", ".join(one(k, v) for k, v in splits.items())


def _missing(entry: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in entry.get("requirements", []) if not r["ok"]]


def print_list(info: list[dict[str, Any]]) -> None:
    """One short line per benchmark (fits 80 columns); `--details` and `--json` carry the rest."""
    table = Table(title="benchmarks", title_justify="left")
    table.add_column("name", no_wrap=True)
    table.add_column("splits (tasks)", max_width=30)  # runnable/total where some cannot run here
    table.add_column("runs here", no_wrap=True)
    table.add_column("missing", max_width=24)
    for e in info:
        missing = ", ".join(r["name"] for r in _missing(e)) or ("failed to load" if e.get("error") else "")
        table.add_row(e["name"], _splits_text(e), "yes" if e.get("can_run") else "no", missing)
    console.print(table)
    console.print("why and how to fix: qit bench list --details (or --json)")


def print_details(info: list[dict[str, Any]]) -> None:
    """Everything about each benchmark: description, splits, recipes, and every requirement with its detail."""
    for e in info:
        console.rule(f"[bold]{e['name']}[/]", align="left")
        if e.get("description"):
            console.print(e["description"], markup=False)
        console.print(f"splits (tasks): {_splits_text(e) or '-'}", markup=False)
        marks = {True: " (upstream's)", False: " (QitOS's own)"}
        named = [f"{r}{marks.get((e.get('recipes_upstream') or {}).get(r), '')}" for r in e.get("recipes", [])]
        console.print(f"recipes: {', '.join(named) or '-'}", markup=False)
        if "options" in e:
            _print_options(e["options"])
        console.print(f"runs here: {'yes' if e.get('can_run') else 'no'}")
        if e.get("error"):
            console.print(f"  [red]failed to load[/]: {e['error']}")
        for r in e.get("requirements", []):
            mark = "[green]ok[/]     " if r["ok"] else "[red]missing[/]"
            if r.get("present") is not None:  # an optional extra: fine either way, but say whether it is here
                mark = "[green]present[/]" if r["present"] else "[yellow]absent[/] "
            console.print(f"  {mark} {r['name']}: ", end="")
            console.print(r["detail"] or "", markup=False)
        for split, r in (e.get("runnable") or {}).items():
            if r.get("reasons") and r.get("runnable"):  # only partly runnable: say which tasks cannot run and why
                console.print(f"  {split}: {r['runnable']} of {r['tasks']} tasks can run here; the others:", markup=False)
                for reason, count in r["reasons"].items():
                    console.print(f"    {count} × {reason}", markup=False)
            for recipe, limit in (r.get("recipes") or {}).items():  # a validator that cannot check some of them
                if limit.get("reasons"):
                    console.print(f"  {split}, recipe {recipe}: checks {limit['runnable']} of the {r['runnable']} "
                                  "that run here; the others:", markup=False)
                    for reason, count in limit["reasons"].items():
                        console.print(f"    {count} × {reason}", markup=False)


def _print_options(options: list[dict[str, Any]] | None) -> None:
    """`--option` keys: name, type, default, allowed values and what each does."""
    if options is None:
        console.print("options: not declared (passed to the benchmark unchecked)", markup=False)
        return
    if not options:
        console.print("options: none (this benchmark takes no --option)", markup=False)
        return
    console.print("options (--option KEY=VALUE):", markup=False)
    for o in options:
        default = "unset" if o["default"] is None else json.dumps(o["default"])
        flag = f"; also {o['flag']}" if o.get("flag") else ""
        console.print(f"  {o['name']} ({o['type']}, default {default}; {o['range']}{flag}): {o['help']}", markup=False)
