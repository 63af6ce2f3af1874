"""Scoring side: downloads of task inputs (setup `download` steps) and gold files (`cloud_file`), cached by URL so a rerun
fetches nothing twice. A pre-filled cache (`<data dir>/osworld-cache/<sha256 of URL>`) is also how gold files
are provided offline."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Protocol

from qitos.benchmark.osworld.errors import DownloadError


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
