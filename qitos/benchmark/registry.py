"""Which benchmarks exist: built-in families plus third parties via the `qitos.benchmarks` entry point."""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import entry_points

from .base import BenchmarkAdapter
from .errors import BenchmarkUsageError

BUILTIN: dict[str, str] = {
    "jsonl": "qitos.benchmark.jsonl.adapter:JsonlBenchmark",
    "tau-bench": "qitos.benchmark.tau_bench.adapter:TauBenchAdapter",
    "gaia": "qitos.benchmark.gaia.adapter:GaiaAdapter",
    "cybench": "qitos.benchmark.cybench.adapter:CybenchAdapter",
    "desktop": "qitos.benchmark.desktop.adapter:DesktopAdapter",
    "osworld": "qitos.benchmark.osworld.adapter:OsworldAdapter",
}
_EXTRA: dict[str, type[BenchmarkAdapter]] = {}


def register(adapter: type[BenchmarkAdapter]) -> type[BenchmarkAdapter]:
    """Register an adapter class in-process (tests, notebooks). Also usable as a decorator."""
    _EXTRA[adapter.name] = adapter
    return adapter


def _load_ref(ref: str) -> type[BenchmarkAdapter]:
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


def available() -> dict[str, str]:
    """Name → reference ('module:Class' or 'in-process') of every known benchmark."""
    names = {name: ref for name, ref in BUILTIN.items() if _importable(ref)}
    for ep in entry_points(group="qitos.benchmarks"):
        names.setdefault(ep.name, ep.value)
    names.update({name: "in-process" for name in _EXTRA})
    return names


def _importable(ref: str) -> bool:
    module = ref.partition(":")[0]
    return importlib.util.find_spec(module) is not None


def get_adapter(name: str) -> BenchmarkAdapter:
    if name in _EXTRA:
        return _EXTRA[name]()
    if name in BUILTIN and _importable(BUILTIN[name]):
        return _load_ref(BUILTIN[name])()
    for ep in entry_points(group="qitos.benchmarks"):
        if ep.name == name:
            try:
                cls = ep.load()
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the message
                raise BenchmarkUsageError(f"benchmark '{name}' (entry point {ep.value}) failed to load: {exc}") from None
            return cls()
    raise BenchmarkUsageError(f"unknown benchmark '{name}'; available: {', '.join(sorted(available()))} "
                              "(`qit bench list` shows them)")
