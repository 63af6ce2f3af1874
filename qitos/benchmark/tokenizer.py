"""Token counts as upstream agents take them: tiktoken's gpt-4 encoding (cl100k_base), available offline.

Why: OSWorld's PromptAgent trims the accessibility tree to `a11y_tree_max_tokens` and CyBench's agent truncates
its input to `max_input_tokens`, both with `tiktoken.encoding_for_model("gpt-4")`. tiktoken downloads that
encoding's ranks from OpenAI's blob store, which a machine without internet cannot reach. The same ranks ship in
the `tiktoken` npm package (a package registry is reachable): `install` takes them from its pinned tarball,
writes them in tiktoken's own `.tiktoken` format and checks them against the sha256 tiktoken itself expects, then
stores the file in a tiktoken cache directory under tiktoken's cache key. With `TIKTOKEN_CACHE_DIR` pointing
there, `tiktoken.encoding_for_model("gpt-4")` works unmodified (in QitOS and in upstream's code alike).

Where: `$QITOS_TIKTOKEN_DIR` if set, else `~/.cache/qitos/tiktoken`. No gold: the agent side may read it.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path
from typing import Any, Callable

TIKTOKEN_ENV = "QITOS_TIKTOKEN_DIR"
INSTALL_HINT = "run `qit data fetch tokenizer`"
# the npm package and the member holding cl100k_base's ranks (js-tiktoken's compact form)
NPM_TARBALL = "https://registry.npmjs.org/tiktoken/-/tiktoken-1.0.22.tgz"
NPM_TARBALL_SHA256 = "55c339e756fdb17604f7c7e3eb35d2bcbffe4d960e8096e50285d1cefa51dd90"
NPM_MEMBER = "package/encoders/cl100k_base.json"
# where tiktoken looks for the ranks (its cache key is the sha1 of this URL) and the sha256 it expects of them
TIKTOKEN_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
RANKS_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


class TokenizerMissing(RuntimeError):
    """The gpt-4 encoding is not installed here (the message says how to install it)."""


def cache_dir() -> Path:
    configured = os.environ.get(TIKTOKEN_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "qitos" / "tiktoken"


def ranks_path(directory: Path | None = None) -> Path:
    return (directory or cache_dir()) / hashlib.sha1(TIKTOKEN_URL.encode()).hexdigest()


def present(directory: Path | None = None) -> bool:
    path = ranks_path(directory)
    try:
        stat = path.stat()
    except OSError:
        return False
    return _verified(str(path), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _verified(path: str, mtime_ns: int, size: int) -> bool:  # hashed once per file version, not per job
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() == RANKS_SHA256


def ranks_from_npm(compact: str) -> bytes:
    """js-tiktoken's `bpe_ranks` ("<key> <first rank> <token b64> <token b64> ..." per line) as `.tiktoken` text."""
    lines = []
    for group in compact.split("\n"):
        if not group:
            continue
        fields = group.split(" ")
        first = int(fields[1])
        lines += [f"{token} {first + offset}" for offset, token in enumerate(fields[2:])]
    return ("\n".join(lines) + "\n").encode()


def install(echo: Callable[[str], Any] = print, directory: Path | None = None) -> Path:
    """Download the pinned npm tarball, convert and verify the ranks, store them in tiktoken's cache layout."""
    import httpx

    target = ranks_path(directory)
    if present(directory):
        echo(f"tokenizer: cl100k_base already verified at {target}")
        return target
    echo(f"tokenizer: downloading {NPM_TARBALL}")
    try:
        response = httpx.get(NPM_TARBALL, follow_redirects=True, timeout=120)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise TokenizerMissing(f"cannot download {NPM_TARBALL}: {exc}; not installed") from None
    if hashlib.sha256(response.content).hexdigest() != NPM_TARBALL_SHA256:
        raise TokenizerMissing(f"{NPM_TARBALL}: sha256 differs from the pinned {NPM_TARBALL_SHA256}; not installed")
    with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as archive:
        member = archive.extractfile(NPM_MEMBER)
        if member is None:
            raise TokenizerMissing(f"{NPM_TARBALL} has no {NPM_MEMBER}; not installed")
        ranks = ranks_from_npm(json.load(member)["bpe_ranks"])
    if hashlib.sha256(ranks).hexdigest() != RANKS_SHA256:
        raise TokenizerMissing(f"the ranks converted from {NPM_MEMBER} do not have tiktoken's sha256 {RANKS_SHA256}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(ranks)
    partial.replace(target)
    echo(f"tokenizer: cl100k_base verified (sha256 {RANKS_SHA256[:12]}...) at {target}")
    return target


def activate() -> Path:
    """Point tiktoken at the verified ranks for this process; raise `TokenizerMissing` with the hint if absent."""
    directory = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or cache_dir())
    if not present(directory):
        raise TokenizerMissing(f"tiktoken's gpt-4 encoding (cl100k_base) is not at {directory}: {INSTALL_HINT}")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
    return directory


def gpt4_encoding():
    """`tiktoken.encoding_for_model("gpt-4")`, as upstream agents call it, from the offline ranks."""
    activate()
    import tiktoken

    return tiktoken.encoding_for_model("gpt-4")
