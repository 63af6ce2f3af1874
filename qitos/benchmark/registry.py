"""Which benchmarks exist: built-in families plus third parties via the `qitos.benchmarks` entry point.

Names are matched after normalisation (lower case, `_` and spaces as `-`), and a few aliases name the
built-in families as the QitOS documentation and older results do (`desktop` → `desktop-starter`,
`tau`/`taubench` → `tau-bench`). Rows and traces always carry the canonical name; rows written under an
alias (e.g. `desktop`) still find their adapter, so old results keep evaluating.
"""

from __future__ import annotations

import importlib.util
from importlib.metadata import entry_points

from qitos.benchmark.base import BenchmarkAdapter
from qitos.benchmark.errors import BenchmarkUsageError
from qitos.benchmark.refs import load_ref

BUILTIN: dict[str, str] = {
    "jsonl": "qitos.benchmark.jsonl.adapter:JsonlBenchmark",
    "tau-bench": "qitos.benchmark.tau_bench.adapter:TauBenchAdapter",
    "gaia": "qitos.benchmark.gaia.adapter:GaiaAdapter",
    "cybench": "qitos.benchmark.cybench.adapter:CybenchAdapter",
    "desktop-starter": "qitos.benchmark.desktop.adapter:DesktopAdapter",
    "osworld": "qitos.benchmark.osworld.adapter:OsworldAdapter",
}
ALIASES: dict[str, str] = {"desktop": "desktop-starter", "tau": "tau-bench", "taubench": "tau-bench"}
_EXTRA: dict[str, type[BenchmarkAdapter]] = {}


def normalize(name: str) -> str:
    """`Tau_Bench` → `tau-bench`: lower case, `_` and spaces as `-`."""
    return "-".join(name.strip().lower().replace("_", " ").split())


def canonical_name(name: str) -> str:
    """The name rows and traces carry: built-in aliases resolved; other names only normalised unless a
    plugin registered them exactly as given."""
    if name in _EXTRA or name in BUILTIN:
        return name
    key = normalize(name)
    key = ALIASES.get(key, key)
    if key in BUILTIN or key in _EXTRA:
        return key
    for ep in entry_points(group="qitos.benchmarks"):
        if ep.name == name or normalize(ep.name) == key:
            return ep.name
    return key


def register(adapter: type[BenchmarkAdapter]) -> type[BenchmarkAdapter]:
    """Register an adapter class in-process (tests, notebooks). Also usable as a decorator."""
    _EXTRA[adapter.name] = adapter
    return adapter


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


def get_adapter(given: str) -> BenchmarkAdapter:
    """The adapter of a benchmark name as a user types it (aliases, any case, `_` for `-`)."""
    name = canonical_name(given)
    if name in _EXTRA:
        return _EXTRA[name]()
    if name in BUILTIN and _importable(BUILTIN[name]):
        return load_ref(BUILTIN[name])()
    for ep in entry_points(group="qitos.benchmarks"):
        if ep.name == name:
            try:
                cls = ep.load()
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not hide the message
                raise BenchmarkUsageError(f"benchmark '{name}' (entry point {ep.value}) failed to load: {exc}") from None
            return cls()
    raise BenchmarkUsageError(f"unknown benchmark '{given}'; available: {', '.join(sorted(available()))} "
                              "(`qit bench list` shows them)")
