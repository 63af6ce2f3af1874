"""Options that take several values the way users type them: `--input a.jsonl b.jsonl`, `--option a=1 b=2`.

Click options take one value per occurrence (`--input a --input b`). Shell globs (`--input results/*.jsonl`)
and the documented forms give several values after one flag, so before parsing, the values following such a
flag become one occurrence each: for file flags, up to the next token that starts with `-`; for `--option`,
the following `KEY=VALUE` tokens (a token without `=` ends them). Only flags declared here are spread;
`--flag=value` and the repeated form work unchanged.
"""

from __future__ import annotations

MULTI_VALUE_FLAGS = frozenset({"--input", "-i", "--results"})
PAIR_FLAGS = frozenset({"--option", "-o"})  # values are KEY=VALUE pairs


def spread_multi_values(argv: list[str], flags: frozenset[str] = MULTI_VALUE_FLAGS,
                        pair_flags: frozenset[str] = PAIR_FLAGS) -> list[str]:
    """`[--input, a, b, --by, x]` → `[--input, a, --input, b, --by, x]`; `[-o, a=1, b=2]` → `[-o, a=1, -o, b=2]`
    (arguments after `--` untouched)."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            return out + argv[i:]
        out.append(token)
        i += 1
        if token not in flags and token not in pair_flags:
            continue
        pairs = token in pair_flags
        values = 0
        while i < len(argv) and (values == 0 or _more(argv[i], pairs)):
            if values:
                out.append(token)
            out.append(argv[i])
            values += 1
            i += 1
    return out


def _more(token: str, pairs: bool) -> bool:
    """Does `token` continue the values of the flag before it?"""
    if pairs:
        key = token.partition("=")[0]
        return "=" in token and bool(key) and not key.startswith("-")
    return not token.startswith("-")
