"""Scoring side: load OSWorld's official evaluators (`desktop_env/evaluators/{getters,metrics}`) from a checkout at run time.

The scoring code is data: it is read from the OSWorld folder the tasks come from (`<data dir>/osworld`, or a
user's own checkout given with `--root`, e.g. a later OSWorld-Verified one), never copied into QitOS.

Isolation: upstream imports itself as `desktop_env.evaluators...`. While loading, `desktop_env` is mapped to the
checkout in `sys.modules`; afterwards every loaded module is moved under a private name
(`_qitos_osworld_<digest>.evaluators...`) and `desktop_env` is restored to whatever it was before (a user's own
OSWorld install keeps working). Two checkouts load side by side.
`load_metric` is for a process of its own, the confined scorer (`scorer.py`): one metric's module, `desktop_env`
mapped for the process's life.

Heavy optional imports (easyocr, librosa, pyacoustid, borb, fastdtw, pydrive) are satisfied lazily: when such a
package is not installed, upstream's module gets a placeholder; using it raises `OptionalPackageMissing` naming
the package to install. `needs_packages(func)` finds those needs ahead of time by walking the function's code,
so a task that needs one ends `requires_unavailable` before it runs.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import threading
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from qitos.benchmark.osworld.errors import OSWorldError

# import name -> the package `pip install` needs
OPTIONAL_PACKAGES: dict[str, str] = {
    "easyocr": "easyocr",
    "librosa": "librosa",
    "acoustid": "pyacoustid",
    "borb": "borb",
    "fastdtw": "fastdtw",
    "pydrive": "PyDrive",
}
EVALUATORS = Path("desktop_env") / "evaluators"


class OptionalPackageMissing(OSWorldError):
    """An upstream metric or getter used an optional package that is not installed."""

    def __init__(self, package: str) -> None:
        super().__init__(f"needs the optional package '{package}' (pip install {package})")
        self.package = package


class EvaluatorsNotFound(OSWorldError):
    """The OSWorld folder has no `desktop_env/evaluators` (or it does not import)."""


class _Missing(types.ModuleType):
    """Stands in for an optional package that is not installed: any use raises OptionalPackageMissing."""

    def __init__(self, name: str, package: str) -> None:
        super().__init__(name)
        self.__path__: list[str] = []  # a package, so `from borb.pdf import Document` resolves
        self.__qitos_missing__ = package

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _MissingAttr(self.__qitos_missing__)


class _MissingAttr:
    """A name imported from a missing package (`from fastdtw import fastdtw`)."""

    def __init__(self, package: str) -> None:
        self.__qitos_missing__ = package

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise OptionalPackageMissing(self.__qitos_missing__)

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise OptionalPackageMissing(self.__qitos_missing__)


class _MissingFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on `sys.meta_path` while loading: answers only for optional packages nothing else could import."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        top = fullname.split(".")[0]
        if top not in OPTIONAL_PACKAGES:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _Missing(spec.name, OPTIONAL_PACKAGES[spec.name.split(".")[0]])

    def exec_module(self, module: types.ModuleType) -> None:
        pass


def missing_package(value: Any) -> str | None:
    """The optional package a placeholder stands for, or None for a real object."""
    try:
        package = object.__getattribute__(value, "__qitos_missing__")
    except AttributeError:
        return None
    return package if isinstance(package, str) else None


@dataclass
class UpstreamEvaluators:
    """The `getters` and `metrics` modules of one OSWorld checkout, loaded in their own namespace."""

    root: Path
    namespace: str
    getters: types.ModuleType
    metrics: types.ModuleType
    _needs: dict[str, frozenset[str]] = field(default_factory=dict)

    def metric(self, name: str) -> Callable[..., Any] | None:
        """Upstream's `getattr(metrics, func)`; None when the checkout has no such metric."""
        value = getattr(self.metrics, name, None)
        return value if callable(value) else None

    def getter(self, getter_type: str) -> Callable[..., Any] | None:
        """Upstream's `getattr(getters, "get_" + type)`; None when the checkout has no such getter."""
        value = getattr(self.getters, f"get_{getter_type}", None)
        return value if callable(value) else None

    def needs_packages(self, func: Callable[..., Any] | None) -> frozenset[str]:
        """Optional packages (not installed here) that `func` or upstream code it calls would use."""
        if func is None:
            return frozenset()
        key = f"{getattr(func, '__module__', '')}.{getattr(func, '__qualname__', id(func))}"
        if key not in self._needs:
            self._needs[key] = frozenset(_walk(func, self.namespace, set()))
        return self._needs[key]


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _code_names(const)
    return names


def _walk(func: Any, namespace: str, seen: set[int]) -> set[str]:
    """Packages of placeholders reachable from `func` through the global names its code uses, following
    upstream functions and classes of the same namespace."""
    if id(func) in seen:
        return set()
    seen.add(id(func))
    found: set[str] = set()
    if isinstance(func, type):
        for member in vars(func).values():
            found |= _walk(member, namespace, seen)
        return found
    code = getattr(func, "__code__", None)
    module_globals = getattr(func, "__globals__", None)
    if code is None or module_globals is None:
        return found
    for name in _code_names(code):
        if name not in module_globals:
            continue
        value = module_globals[name]
        package = missing_package(value)
        if package:
            found.add(package)
        elif getattr(value, "__module__", "").startswith(namespace) and (callable(value) or isinstance(value, type)):
            found |= _walk(value, namespace, seen)
    return found


_LOCK = threading.Lock()
_LOADED: dict[Path, UpstreamEvaluators] = {}


def evaluators_dir(root: Path) -> Path:
    """`<root>/desktop_env/evaluators` (root may also be the checkout's `evaluation_examples`)."""
    root = Path(root).expanduser().resolve()
    for base in (root, root.parent):
        candidate = base / EVALUATORS
        if (candidate / "metrics" / "__init__.py").is_file() and (candidate / "getters" / "__init__.py").is_file():
            return candidate
    raise EvaluatorsNotFound(
        f"no OSWorld evaluators at {root / EVALUATORS} (need getters/ and metrics/); run `qit data fetch osworld` "
        "or pass --root an OSWorld checkout that has desktop_env/evaluators"
    )


def load_evaluators(root: Path | str) -> UpstreamEvaluators:
    """Load (once per checkout) upstream's getters and metrics from `root`; see the module docstring."""
    folder = evaluators_dir(Path(root))
    with _LOCK:
        if folder not in _LOADED:
            _LOADED[folder] = _load(folder)
        return _LOADED[folder]


def load_metric(root: Path | str, module: str, attr: str) -> Callable[..., Any] | None:
    """One metric, in a process of its own (the confined scorer, `scorer_main.py`): its module of upstream's
    `metrics` (`module`, below `desktop_env`, e.g. `evaluators.metrics.general`) and what that imports, without the
    package's `__init__`, which imports every module (about 2 s of pandas, OpenCV, PyMuPDF... per process). The
    modules hold only imports, definitions and constants, so the function and its globals are the same.

    For the process's life `desktop_env` stays the checkout and missing optional packages stay placeholders, so
    what the metric imports as it runs (`from .table import compare_csv` in compare_archive, and the modules that
    imports) resolves as the modules loaded up front do in `load_evaluators`."""
    if not (module + ".").startswith("evaluators.metrics.") or not all(p.isidentifier() for p in module.split(".")):
        raise EvaluatorsNotFound(f"no metric module {module!r} in OSWorld's evaluators")
    if any(name == "desktop_env" or name.startswith("desktop_env.") for name in sys.modules):
        raise EvaluatorsNotFound("load_metric maps desktop_env for the whole process: use load_evaluators here")
    folder = evaluators_dir(Path(root))
    sys.meta_path.append(_MissingFinder())
    root_module = types.ModuleType("desktop_env")
    root_module.__path__ = [str(folder.parent)]
    sys.modules["desktop_env"] = root_module
    evaluators = importlib.import_module("desktop_env.evaluators")
    if module != "evaluators.metrics":  # not defined in the package's own `__init__`: enter it without running it
        package = types.ModuleType("desktop_env.evaluators.metrics")
        package.__path__ = [str(folder / "metrics")]
        package.__package__ = package.__name__
        sys.modules[package.__name__] = package
        evaluators.metrics = package  # type: ignore[attr-defined]
    try:
        value = getattr(importlib.import_module(f"desktop_env.{module}"), attr, None)
    except Exception as exc:
        raise EvaluatorsNotFound(f"OSWorld evaluators at {folder} failed to import: {exc.__class__.__name__}: {exc} "
                                 "(install QitOS's osworld extra: pip install 'qitos[osworld]')") from exc
    return value if callable(value) else None


def _load(folder: Path) -> UpstreamEvaluators:
    digest = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    namespace = f"_qitos_osworld_{digest}"
    package_dir = folder.parent  # the checkout's desktop_env/
    saved = {name: mod for name, mod in sys.modules.items() if name == "desktop_env" or name.startswith("desktop_env.")}
    optional_before = {name for name in sys.modules if name.split(".")[0] in OPTIONAL_PACKAGES}
    for name in saved:
        del sys.modules[name]
    finder = _MissingFinder()
    sys.meta_path.append(finder)
    loaded: dict[str, types.ModuleType] = {}
    try:
        root_module = types.ModuleType("desktop_env")
        root_module.__path__ = [str(package_dir)]  # only evaluators/ is imported below
        sys.modules["desktop_env"] = root_module
        try:
            getters = importlib.import_module("desktop_env.evaluators.getters")
            metrics = importlib.import_module("desktop_env.evaluators.metrics")
        except Exception as exc:
            raise EvaluatorsNotFound(
                f"OSWorld evaluators at {folder} failed to import: {exc.__class__.__name__}: {exc} "
                "(install QitOS's osworld extra: pip install 'qitos[osworld]')"
            ) from exc
    finally:
        sys.meta_path.remove(finder)
        for name in [n for n in sys.modules if n == "desktop_env" or n.startswith("desktop_env.")]:
            loaded[name] = sys.modules.pop(name)
        # placeholders for missing optional packages stay private to the upstream modules that imported them
        for name in [n for n in sys.modules if n.split(".")[0] in OPTIONAL_PACKAGES and n not in optional_before]:
            if isinstance(sys.modules[name], _Missing):
                del sys.modules[name]
        sys.modules.update(saved)
    for name, module in loaded.items():
        private = namespace + name[len("desktop_env"):]
        module.__name__ = private
        # relative imports inside functions (`from .vscode import compare_text_file` in compare_archive) resolve
        # through __package__ / __spec__: point them at the loaded copy, not at whatever `desktop_env` is then
        if module.__spec__ is not None:
            module.__spec__.name = private
        package = getattr(module, "__package__", None)
        if package and (package == "desktop_env" or package.startswith("desktop_env.")):
            module.__package__ = namespace + package[len("desktop_env"):]
        sys.modules[private] = module  # pickling and tracebacks name the private module
        for value in vars(module).values():
            if getattr(value, "__module__", None) == name:
                try:
                    value.__module__ = private
                except (AttributeError, TypeError):
                    pass
    return UpstreamEvaluators(root=folder, namespace=namespace, getters=getters, metrics=metrics)
