"""Result/expected getters: turn an evaluator `{type, ...}` config into the value a metric receives.

Local getters need no desktop: `rule` (inline value), `rule_relativeTime` (dates computed for today),
`cache_file` (a file a postconfig step wrote to the cache dir) and `cloud_file` (a gold file fetched by a
`Downloader`). `vm_file`, `vm_command_line`, `vm_command_error` and the profile-file getters in
`state_getters.py` use the provider's two primitives, `read_file` and `run_command`; anything else must be a
native getter of the provider (`provider.native_getters()`), or it is reported as unsupported.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .errors import DownloadError, UnsupportedGetter
from .relative_time import relative_time_rules
from .tasks import GetterConfig

if TYPE_CHECKING:
    from .provider import Provider


class Downloader(Protocol):
    """Fetches a URL (task inputs, gold files) to a local path."""

    def fetch(self, url: str, dest: Path) -> Path: ...


class HttpDownloader:
    """Plain HTTP(S) download with redirects (Google Drive `export=download` links work for small files).

    With `cache_root`, each URL is fetched once and later copied from `<cache_root>/<sha256 of URL>`, so
    reruns do not download the same task inputs and gold files again.
    """

    def __init__(self, timeout: float = 120.0, cache_root: Path | None = None) -> None:
        self.timeout = timeout
        self.cache_root = cache_root

    def fetch(self, url: str, dest: Path) -> Path:
        dest.parent.mkdir(parents=True, exist_ok=True)
        if self.cache_root is None:
            return self._download(url, dest)
        cached = self.cache_root / hashlib.sha256(url.encode()).hexdigest()
        if not cached.is_file():
            self.cache_root.mkdir(parents=True, exist_ok=True)
            partial = cached.with_suffix(".part")
            self._download(url, partial)
            partial.replace(cached)
        shutil.copyfile(cached, dest)
        return dest

    def _download(self, url: str, dest: Path) -> Path:
        import httpx

        try:
            with httpx.stream("GET", url, follow_redirects=True, timeout=self.timeout) as response:
                response.raise_for_status()
                with dest.open("wb") as handle:
                    for chunk in response.iter_bytes():
                        handle.write(chunk)
        except httpx.HTTPError as exc:
            raise DownloadError(f"could not download {url}: {exc}") from None
        return dest


class RequiresProvider(Exception):
    """Raised when a getter needs the desktop and no provider is configured."""


@dataclass
class GetterContext:
    """Everything a getter may need; `home` is the desktop user's home inside the VM."""

    cache_dir: Path
    provider: "Provider | None" = None
    downloader: Downloader | None = None
    today: dt.date | None = None
    home: str = "/home/user"
    _downloaded: dict[str, Path] = field(default_factory=dict)

    def need_provider(self, what: str) -> "Provider":
        if self.provider is None:
            raise RequiresProvider(f"getter '{what}' needs a desktop provider")
        return self.provider

    def save(self, dest: str, data: bytes) -> Path:
        path = self.cache_dir / Path(dest).name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return path


Getter = Callable[[GetterConfig, GetterContext], Any]
LOCAL_GETTERS = frozenset({"rule", "rule_relativeTime", "cache_file", "cloud_file"})


def _rule(config: GetterConfig, ctx: GetterContext) -> Any:
    return config.get("rules")


def _rule_relative_time(config: GetterConfig, ctx: GetterContext) -> Any:
    return relative_time_rules(config.get("rules") or {}, ctx.today)


def _cache_file(config: GetterConfig, ctx: GetterContext) -> Any:
    path = ctx.cache_dir / str(config.get("path"))
    return str(path) if path.is_file() else None


def _as_list(value: Any) -> list[Any]:
    return list(value) if isinstance(value, list) else [value]


def _multi(config: GetterConfig, fetch_one: Callable[[str, str], Path | None]) -> Any:
    """Shared `path`/`dest`/`multi`/`gives` handling: with `multi`, every file is fetched (so side files such
    as per-sheet CSVs sit next to the main one) and `gives` (default [0]) picks what the metric receives."""
    paths, dests = _as_list(config.get("path")), _as_list(config.get("dest"))
    if len(paths) != len(dests):
        raise UnsupportedGetter(f"getter '{config.type}': path and dest lists differ in length")
    fetched = [fetch_one(str(p), str(d)) for p, d in zip(paths, dests)]
    values = [str(f) if f is not None else None for f in fetched]
    multi = str(config.get("multi", False)).lower() == "true" or len(paths) > 1
    if not multi:
        return values[0]
    gives = _as_list(config.get("gives", [0]))
    picked = [values[int(i)] for i in gives]
    return picked[0] if len(picked) == 1 else picked


def _cloud_file(config: GetterConfig, ctx: GetterContext) -> Any:
    if ctx.downloader is None:
        raise RequiresProvider("getter 'cloud_file' needs a downloader for gold files")
    downloader = ctx.downloader

    def fetch(url: str, dest: str) -> Path:
        if url not in ctx._downloaded:
            ctx._downloaded[url] = downloader.fetch(url, ctx.cache_dir / Path(dest).name)
        return ctx._downloaded[url]

    return _multi(config, fetch)


def _vm_file(config: GetterConfig, ctx: GetterContext) -> Any:
    provider = ctx.need_provider(config.type)
    if config.get("time_suffix"):
        raise UnsupportedGetter("getter 'vm_file' with time_suffix (a time-stamped file name) is not supported")

    def fetch(path: str, dest: str) -> Path | None:
        data = provider.read_file(path)
        return None if data is None else ctx.save(dest, data)

    return _multi(config, fetch)


def _vm_command_line(config: GetterConfig, ctx: GetterContext) -> Any:
    result = ctx.need_provider(config.type).run_command(config.get("command"), shell=_truthy(config.get("shell")))
    return result.output


def _vm_command_error(config: GetterConfig, ctx: GetterContext) -> Any:
    result = ctx.need_provider(config.type).run_command(config.get("command"), shell=_truthy(config.get("shell")))
    return result.error


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() == "true"


GETTERS: dict[str, Getter] = {
    "rule": _rule,
    "rule_relativeTime": _rule_relative_time,
    "cache_file": _cache_file,
    "cloud_file": _cloud_file,
    "vm_file": _vm_file,
    "vm_command_line": _vm_command_line,
    "vm_command_error": _vm_command_error,
}


def _all_getters() -> dict[str, Getter]:
    from .state_getters import STATE_GETTERS

    return {**STATE_GETTERS, **GETTERS}


def getter_available(getter_type: str, provider: "Provider | None") -> bool:
    """Whether this getter can run: local ones always, the rest only through a provider that offers them."""
    if getter_type in LOCAL_GETTERS:
        return True
    if provider is None:
        return False
    return getter_type in _all_getters() or getter_type in provider.native_getters()


def known_getter_types() -> frozenset[str]:
    """Getters QitOS implements itself (the provider may add native ones)."""
    return frozenset(_all_getters())


def get_value(config: GetterConfig, ctx: GetterContext) -> Any:
    """Run one getter. Raises UnsupportedGetter for unknown types and RequiresProvider without a desktop."""
    getter = _all_getters().get(config.type)
    if getter is not None:
        return getter(config, ctx)
    if ctx.provider is not None and config.type in ctx.provider.native_getters():
        return ctx.provider.get_state(config, ctx)
    if ctx.provider is None:
        raise RequiresProvider(f"getter '{config.type}' needs a desktop provider")
    raise UnsupportedGetter(f"unsupported getter '{config.type}' (provider {ctx.provider.name} does not offer it)")
