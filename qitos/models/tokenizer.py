"""Token counts as upstream agents take them: tiktoken's cl100k_base and o200k_base encodings, available offline.

Why: OSWorld's PromptAgent trims the accessibility tree with `tiktoken.encoding_for_model("gpt-4")` (cl100k_base,
whatever the model); CyBench's agent truncates its input to `max_input_tokens` with
`tiktoken.encoding_for_model(<the model's name>)`, falling back to gpt-4's encoding for a name tiktoken does not
know (`encoding_for_model` here; gpt-4o models count with o200k_base). tiktoken downloads an encoding's ranks from
OpenAI's blob store, which a machine without internet cannot reach. The same ranks ship in the `tiktoken` npm
package (a package registry is reachable): `install` takes them from its pinned tarball, writes them in tiktoken's
own `.tiktoken` format and checks them against the sha256 tiktoken itself expects, then stores each file in a
tiktoken cache directory under tiktoken's cache key. With `TIKTOKEN_CACHE_DIR` pointing there,
`tiktoken.encoding_for_model(...)` works unmodified (in QitOS and in upstream's code alike).

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
from typing import Any, Callable, NamedTuple

TIKTOKEN_ENV = "QITOS_TIKTOKEN_DIR"
INSTALL_HINT = "run `qit data fetch tokenizer`"
# the npm package that holds the ranks (js-tiktoken's compact form, one member per encoding)
NPM_TARBALL = "https://registry.npmjs.org/tiktoken/-/tiktoken-1.0.22.tgz"
NPM_TARBALL_SHA256 = "55c339e756fdb17604f7c7e3eb35d2bcbffe4d960e8096e50285d1cefa51dd90"
GPT4 = "cl100k_base"


class Encoding(NamedTuple):
    member: str  # in the npm tarball
    url: str  # where tiktoken looks for the ranks (its cache key is the sha1 of this URL)
    sha256: str  # what tiktoken expects of them (tiktoken_ext/openai_public.py)


ENCODINGS = {
    "cl100k_base": Encoding("package/encoders/cl100k_base.json",
                            "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
                            "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"),
    "o200k_base": Encoding("package/encoders/o200k_base.json",
                           "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
                           "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"),
}
# the cl100k_base names, kept for callers that predate o200k
NPM_MEMBER, TIKTOKEN_URL, RANKS_SHA256 = ENCODINGS[GPT4]


class TokenizerMissing(RuntimeError):
    """An encoding is not installed here (the message says how to install it)."""


def cache_dir() -> Path:
    configured = os.environ.get(TIKTOKEN_ENV)
    return Path(configured).expanduser() if configured else Path.home() / ".cache" / "qitos" / "tiktoken"


def ranks_path(directory: Path | None = None, name: str = GPT4) -> Path:
    return (directory or cache_dir()) / hashlib.sha1(ENCODINGS[name].url.encode()).hexdigest()


def present(directory: Path | None = None, name: str = GPT4) -> bool:
    path = ranks_path(directory, name)
    try:
        stat = path.stat()
    except OSError:
        return False
    return _verified(str(path), stat.st_mtime_ns, stat.st_size, ENCODINGS[name].sha256)


@functools.lru_cache(maxsize=8)
def _verified(path: str, mtime_ns: int, size: int, sha256: str) -> bool:  # hashed once per file version, not per job
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() == sha256


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
    """Download the pinned npm tarball, convert and verify each encoding's ranks, store them in tiktoken's cache
    layout; the folder is returned."""
    import httpx

    missing = [name for name in ENCODINGS if not present(directory, name)]
    for name in ENCODINGS:
        if name not in missing:
            echo(f"tokenizer: {name} already verified at {ranks_path(directory, name)}")
    if not missing:
        return ranks_path(directory).parent
    echo(f"tokenizer: downloading {NPM_TARBALL}")
    try:
        response = httpx.get(NPM_TARBALL, follow_redirects=True, timeout=120)
        response.raise_for_status()
    except httpx.HTTPError as exc:
        raise TokenizerMissing(f"cannot download {NPM_TARBALL}: {exc}; not installed") from None
    if hashlib.sha256(response.content).hexdigest() != NPM_TARBALL_SHA256:
        raise TokenizerMissing(f"{NPM_TARBALL}: sha256 differs from the pinned {NPM_TARBALL_SHA256}; not installed")
    with tarfile.open(fileobj=io.BytesIO(response.content), mode="r:gz") as archive:
        for name in missing:
            _store(archive, name, ranks_path(directory, name), echo)
    return ranks_path(directory).parent


def _store(archive: tarfile.TarFile, name: str, target: Path, echo: Callable[[str], Any]) -> None:
    spec = ENCODINGS[name]
    member = archive.extractfile(spec.member)
    if member is None:
        raise TokenizerMissing(f"{NPM_TARBALL} has no {spec.member}; not installed")
    ranks = ranks_from_npm(json.load(member)["bpe_ranks"])
    if hashlib.sha256(ranks).hexdigest() != spec.sha256:
        raise TokenizerMissing(f"the ranks converted from {spec.member} do not have tiktoken's sha256 {spec.sha256}")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    partial.write_bytes(ranks)
    partial.replace(target)
    echo(f"tokenizer: {name} verified (sha256 {spec.sha256[:12]}...) at {target}")


def activate(name: str = GPT4) -> Path:
    """Point tiktoken at the verified ranks for this process; raise `TokenizerMissing` with the hint if absent."""
    directory = Path(os.environ.get("TIKTOKEN_CACHE_DIR") or cache_dir())
    if not present(directory, name):
        raise TokenizerMissing(f"tiktoken's {name} encoding is not at {directory}: {INSTALL_HINT}")
    os.environ["TIKTOKEN_CACHE_DIR"] = str(directory)
    return directory


def gpt4_encoding():
    """`tiktoken.encoding_for_model("gpt-4")`, as upstream agents call it, from the offline ranks."""
    activate()
    import tiktoken

    return tiktoken.encoding_for_model("gpt-4")


def encoding_name_for_model(model: str) -> str:
    """The encoding upstream CyBench counts `model` with: `tiktoken.encoding_for_model(model)` as its pinned
    tiktoken (0.7.0, upstream's requirements.txt) answers, and gpt-4's for a name that version does not know
    (upstream's `except KeyError` fallback). tiktoken 0.7.0 maps `gpt-4o` and `gpt-4o-*` to o200k_base and knows
    no later family (o1, gpt-4.1, ...: cl100k_base upstream), so a newer tiktoken's o200k answer counts only for
    gpt-4o names; its other answers (cl100k_base, or an older encoding for a legacy completion model) stand."""
    import tiktoken.model

    try:
        name = tiktoken.model.encoding_name_for_model(model)
    except KeyError:
        return GPT4
    if name.startswith("o200k") and not (model == "gpt-4o" or model.startswith("gpt-4o-")):
        return GPT4
    return name


def encoding_for_model(model: str):
    """Upstream CyBench's encoding for `model` (see `encoding_name_for_model`), from the offline ranks; a name
    tiktoken maps to an encoding `install` does not provide raises `TokenizerMissing` naming it."""
    name = encoding_name_for_model(model)
    if name not in ENCODINGS:
        raise TokenizerMissing(f"tiktoken counts model {model!r} with {name}, which `qit data fetch tokenizer` does "
                               f"not install (it installs {', '.join(ENCODINGS)})")
    activate(name)
    import tiktoken

    return tiktoken.get_encoding(name)
