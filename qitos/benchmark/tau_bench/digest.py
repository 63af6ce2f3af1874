"""Scoring side (it runs every action of an episode and replays gold with it; the agent side only names tools): two fingerprints of a Tau-Bench database, and the text pieces they are built from.

* The canonical digest (our contract, used by the conformance fixtures): sha256 of
  ``json.dumps(db, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``.
* The upstream data hash (what tau-bench's reward compares): sha256 of ``str()`` of the
  database turned into nested tuples (dicts become key-sorted pair tuples, lists tuples).

Both are compositional over the two top levels of the database (collection, then record id),
which lets :mod:`state` cache one text piece per pristine record and rebuild a digest
after an episode by re-serialising only the records that were written.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


def canonical_json(value: Any) -> str:
    """The canonical JSON text of one value (sorted keys, compact, UTF-8 not escaped)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def to_hashable(value: Any) -> Any:
    """Upstream's conversion: dict -> key-sorted tuple of pairs, list -> tuple, set -> sorted tuple."""
    if isinstance(value, dict):
        return tuple(sorted((key, to_hashable(item)) for key, item in value.items()))
    if isinstance(value, list):
        return tuple(to_hashable(item) for item in value)
    if isinstance(value, set):
        return tuple(sorted(to_hashable(item) for item in value))
    return value


def upstream_text(value: Any) -> str:
    """``str()`` of the hashable form: the text whose sha256 is upstream's data hash."""
    return str(to_hashable(value))


def sha256_hex(text: str | bytes) -> str:
    return hashlib.sha256(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def canonical_digest(db: Mapping[str, Any]) -> str:
    """Canonical digest of a whole database (direct, unoptimised form)."""
    return sha256_hex(canonical_json(db))


def upstream_data_hash(db: Mapping[str, Any]) -> str:
    """Upstream tau-bench's ``get_data_hash`` (direct, unoptimised form)."""
    return sha256_hex(upstream_text(db))


# --- Composition of the two texts from per-entry pieces --------------------------------------
# Both texts print a dict (after the top-level, and each collection) as open + entries joined by
# a separator + close, each entry being a key prefix, the value's text and a suffix.


def _canonical_key(key: str) -> str:
    return json.dumps(key, ensure_ascii=False) + ":"


def _upstream_key(key: str) -> str:
    return "(" + repr(key) + ", "


@dataclass(frozen=True)
class TextFormat:
    """How one fingerprint prints values and key-sorted mappings (entries in sorted key order)."""

    name: str
    value: Callable[[Any], str]
    key_prefix: Callable[[str], str]
    entry_suffix: str
    open: str
    separator: str
    close: str
    close_single: str  # upstream prints a 1-tuple as "(x,)"

    def entry(self, key: str, value_text: str) -> str:
        return self.key_prefix(key) + value_text + self.entry_suffix

    def closing(self, count: int) -> str:
        return self.close_single if count == 1 else self.close

    def mapping(self, entries: list[str]) -> str:
        return self.open + self.separator.join(entries) + self.closing(len(entries))


CANONICAL = TextFormat("canonical", canonical_json, _canonical_key, "", "{", ",", "}", "}")
UPSTREAM = TextFormat("upstream", upstream_text, _upstream_key, ")", "(", ", ", ")", ",)")
