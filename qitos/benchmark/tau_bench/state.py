"""Scoring side (episodes and the gold replay act on it; the agent side uses only `deep_copy`): the mutable database of one episode: copy-on-write over a pristine, shared database.

Why: upstream re-parses ~2-5 MB of JSON on every reset and again for every reward. Here the
pristine database is parsed once per process; an episode gets shallow copies of the
collections (microseconds), and a record is deep-copied the first time a tool writes to it
(:meth:`TauDb.writable`). The set of written records also makes both fingerprints cheap:
pristine records contribute cached text, only written records are re-serialised.

Contract for tools: read through ``db[collection]``; call ``db.writable(collection, key)``
before mutating a record (and mutate only what it returns); add records with
:meth:`TauDb.insert`. Top-level records are never deleted.
"""

from __future__ import annotations

import copy
import hashlib
import marshal
from typing import Any

from qitos.benchmark.tau_bench.digest import CANONICAL, UPSTREAM, TextFormat

Record = dict[str, Any]
Collections = dict[str, dict[str, Any]]
FORMATS = (CANONICAL, UPSTREAM)


def deep_copy(value: Any) -> Any:
    """Fast deep copy of JSON-like data (marshal round trip); falls back to copy.deepcopy."""
    try:
        return marshal.loads(marshal.dumps(value))
    except ValueError:  # an object marshal does not know (e.g. a subclass of dict)
        return copy.deepcopy(value)


class PristineDb:
    """The freshly loaded database of a domain, never mutated, with cached fingerprint pieces.

    Per format it caches the UTF-8 text of every record entry, of every whole collection, and
    the sha256 state after each prefix of untouched collections, so that a fingerprint only
    hashes from the first written collection on.
    """

    def __init__(self, collections: Collections) -> None:
        self.collections = collections
        self.names = tuple(sorted(collections))
        self._sorted_keys = {name: sorted(coll) for name, coll in collections.items()}
        self._entries: dict[tuple[str, str], dict[str, bytes]] = {}
        self._pieces: dict[tuple[str, str], bytes] = {}
        self._prefixes: dict[str, list[Any]] = {}

    def sorted_keys(self, name: str) -> list[str]:
        return self._sorted_keys[name]

    def entries(self, fmt: TextFormat, name: str) -> dict[str, bytes]:
        """Per-record entry text of one collection, computed once per format."""
        cached = self._entries.get((fmt.name, name))
        if cached is None:
            coll = self.collections[name]
            cached = {key: fmt.entry(key, fmt.value(coll[key])).encode() for key in self._sorted_keys[name]}
            self._entries[(fmt.name, name)] = cached
        return cached

    def piece(self, fmt: TextFormat, name: str) -> bytes:
        """The entry text of a whole untouched collection."""
        cached = self._pieces.get((fmt.name, name))
        if cached is None:
            entries = self.entries(fmt, name)
            head = (fmt.key_prefix(name) + fmt.open).encode()
            tail = (fmt.closing(len(entries)) + fmt.entry_suffix).encode()
            cached = head + fmt.separator.encode().join(entries.values()) + tail
            self._pieces[(fmt.name, name)] = cached
        return cached

    def prefix_hash(self, fmt: TextFormat, count: int) -> Any:
        """A fresh sha256 object fed with the text before collection number `count`."""
        states = self._prefixes.get(fmt.name)
        if states is None:
            hasher = hashlib.sha256(fmt.open.encode())
            states = [hasher.copy()]
            for index, name in enumerate(self.names):
                if index:
                    hasher.update(fmt.separator.encode())
                hasher.update(self.piece(fmt, name))
                states.append(hasher.copy())
            self._prefixes[fmt.name] = states
        return states[count].copy()

    def digest(self) -> str:
        return TauDb(self).digest()


class TauDb:
    """One episode's database. Reads see the pristine records until a record is written."""

    __slots__ = ("pristine", "_collections", "_dirty")

    def __init__(self, pristine: PristineDb) -> None:
        self.pristine = pristine
        self._collections: Collections = {name: dict(coll) for name, coll in pristine.collections.items()}
        self._dirty: dict[str, set[str]] = {}

    def __getitem__(self, name: str) -> dict[str, Any]:
        """A collection, for reading. Never mutate records obtained this way."""
        return self._collections[name]

    def writable(self, name: str, key: Any) -> Record:
        """The record `key` of collection `name`, private to this episode (KeyError if absent)."""
        coll = self._collections[name]
        record = coll[key]
        dirty = self._dirty.setdefault(name, set())
        if key not in dirty:
            record = deep_copy(record)
            coll[key] = record
            dirty.add(key)
        return record

    def insert(self, name: str, key: str, record: Record) -> None:
        """Add or overwrite a record (the record becomes owned by this database)."""
        self._collections[name][key] = record
        self._dirty.setdefault(name, set()).add(key)

    def written(self) -> dict[str, frozenset[str]]:
        """Ids of the records this episode wrote to (or inserted), per collection."""
        return {name: frozenset(keys) for name, keys in self._dirty.items() if keys}

    def to_dict(self) -> Collections:
        """A fully independent deep copy of the current database."""
        return deep_copy(self._collections)

    def digest(self) -> str:
        """Canonical digest: sha256 of the sorted-keys compact JSON of the whole database."""
        return self._fingerprint(CANONICAL)

    def upstream_hash(self) -> str:
        """Upstream tau-bench's data hash of the whole database."""
        return self._fingerprint(UPSTREAM)

    def _fingerprint(self, fmt: TextFormat) -> str:
        names = self.pristine.names
        first = next((i for i, name in enumerate(names) if self._dirty.get(name)), len(names))
        hasher = self.pristine.prefix_hash(fmt, first)
        separator = fmt.separator.encode()
        for index in range(first, len(names)):
            name = names[index]
            if index:
                hasher.update(separator)
            dirty = self._dirty.get(name)
            if not dirty:
                hasher.update(self.pristine.piece(fmt, name))
                continue
            coll = self._collections[name]
            cached = self.pristine.entries(fmt, name)
            keys = self.pristine.sorted_keys(name)
            if len(coll) != len(keys):  # records were inserted
                keys = sorted(coll)
            hasher.update((fmt.key_prefix(name) + fmt.open).encode())
            hasher.update(
                separator.join(
                    fmt.entry(key, fmt.value(coll[key])).encode() if key in dirty else cached[key] for key in keys
                )
            )
            hasher.update((fmt.closing(len(keys)) + fmt.entry_suffix).encode())
        hasher.update(fmt.closing(len(names)).encode())
        return hasher.hexdigest()
