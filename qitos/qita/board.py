"""The board's shared state: config, the run index, and bounded caches of traces and results.

Views get everything through one `Board`, so the HTTP layer stays thin and the same objects
serve tests, the CLI and the scale benchmark. Caches are LRU-bounded: browsing many runs
never holds more than a few traces' line offsets in memory.
"""

from __future__ import annotations

from pathlib import Path

from .config import BoardConfig
from .configs import ConfigCatalog
from .index import RunIndex
from .query import RunQueries
from .resultsets import ResultSet, load_result_set
from .runtrace import RunFiles, is_run_dir
from .security import valid_run_name
from .tracefile import LRU


class NotFound(LookupError):
    """A page asked for something that does not exist (rendered as a 404 page)."""


class Board:
    def __init__(self, config: BoardConfig) -> None:
        config.validate()
        self.config = config
        self.index = RunIndex(config.logdir, config.index_path(), config.results, config.refresh_seconds)
        self.queries = RunQueries(self.index)
        self._runs: LRU[RunFiles] = LRU(16)
        self._results: LRU[ResultSet] = LRU(max(8, len(config.results)))
        self.configs = ConfigCatalog(self.index, self._all_results)

    def _all_results(self) -> list[tuple[Path, list[dict]]]:
        out = []
        for n, path in enumerate(self.config.results):
            try:
                out.append((path, self.result_set(n).rows))
            except NotFound:
                continue  # a results file removed while the board runs: its configurations go away
        return out

    def refresh(self, force: bool = False) -> None:
        self.index.refresh(force=force)

    def run_dir(self, name: str) -> Path:
        """The directory of run `name`: a real (non-symlink) direct child of the logdir, or NotFound."""
        if not valid_run_name(name):
            raise NotFound(f"'{name}' is not a run name")
        path = self.config.logdir / name
        if path.is_symlink() or not is_run_dir(path):
            raise NotFound(f"no run '{name}' in {self.config.logdir}")
        return path

    def run(self, name: str) -> RunFiles:
        path = self.run_dir(name)
        files = self._runs.get(name, lambda: RunFiles(path))
        files.refresh()
        return files

    def results_file(self, number: int) -> Path:
        if not 0 <= number < len(self.config.results):
            raise NotFound(f"no results file #{number}; the board was started with {len(self.config.results)}")
        return self.config.results[number]

    def result_set(self, number: int) -> ResultSet:
        path = self.results_file(number)
        try:
            st = path.stat()
        except OSError as exc:
            raise NotFound(f"results file {path} is gone ({exc.strerror})") from exc
        return self._results.get(f"{path}:{st.st_mtime_ns}:{st.st_size}", lambda: load_result_set(path))

    def known_run(self, name: str | None) -> bool:
        return bool(name) and self.index.has(name or "")
