"""Options that take several values the way users type them: `--input a.jsonl b.jsonl`.

Click options take one value per occurrence (`--input a --input b`). Shell globs (`--input results/*.jsonl`)
and the documented form give several values after one flag, so before parsing, the values following such a
flag, up to the next token that starts with `-`, become one occurrence each. Only flags declared here are
spread; `--flag=value` and the repeated form work unchanged.
"""

from __future__ import annotations

MULTI_VALUE_FLAGS = frozenset({"--input", "-i", "--results"})


def spread_multi_values(argv: list[str], flags: frozenset[str] = MULTI_VALUE_FLAGS) -> list[str]:
    """`[--input, a, b, --by, x]` → `[--input, a, --input, b, --by, x]` (arguments after `--` untouched)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return out + argv[i:]
        out.append(token)
        i += 1
        if token not in flags:
            continue
        values = 0
        while i < len(argv) and (values == 0 or not argv[i].startswith("-")):
            if values:
                out.append(token)
            out.append(argv[i])
            values += 1
            i += 1
    return out
