"""A model file's identity: its name and a sha256 prefix, so traces say exactly which weights ran.

Hashing a GGUF file reads all of it (hundreds of MB to GB), so the digest is cached per file under
`~/.cache/qitos/file-sha256.json` (or `$XDG_CACHE_HOME/qitos/...`), keyed by absolute path, size and
mtime: the file is hashed again only when it changes. A cache that cannot be read or written only
costs a re-hash, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path

PREFIX_HEX = 12
_LOCK = threading.Lock()


def cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qitos" / "file-sha256.json"


def _read_cache(path: Path) -> dict[str, dict]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(path: Path, data: dict[str, dict]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".file-sha256-", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


def file_sha256(file: Path) -> str:
    """Full sha256 hex of `file`, from the cache when its path, size and mtime are unchanged."""
    file = file.resolve()
    st = file.stat()
    key, stamp = str(file), {"size": st.st_size, "mtime_ns": st.st_mtime_ns}
    cache = cache_path()
    with _LOCK:
        entry = _read_cache(cache).get(key)
        if isinstance(entry, dict) and all(entry.get(k) == v for k, v in stamp.items()) and entry.get("sha256"):
            return str(entry["sha256"])
        h = hashlib.sha256()
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
        digest = h.hexdigest()
        data = _read_cache(cache)
        data[key] = {**stamp, "sha256": digest}
        _write_cache(cache, data)
        return digest


def file_identity(file: Path) -> str:
    """`<file name>@sha256:<12 hex>`: what `model_id` records for a model loaded from a file."""
    return f"{file.name}@sha256:{file_sha256(file)[:PREFIX_HEX]}"
