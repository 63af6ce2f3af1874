"""Benchmark options (`--option KEY=VALUE`): declared per family, checked before anything runs.

Each family declares its options as a pydantic model (one typed field per key, with its default, range and
help); `resolve_options` turns what the user typed into every declared option with its value, defaults
filled in. A run records that resolved set (RunSpec metadata, ExperimentSpec), so leaving a default out and
writing it in are one configuration. An unknown key (with a "did you mean"), a value of the wrong type or out
of range is one `BenchmarkUsageError` naming the key and what is allowed.

Values typed on the command line are strings; pydantic's lax mode parses them (`"5"` → 5, `"1"`/`"true"` →
True). Resolving an already resolved set returns it unchanged, so replays and the agent side can resolve again.
"""

from __future__ import annotations

import difflib
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from qitos.benchmark.errors import BenchmarkUsageError


class BenchmarkOptions(BaseModel):
    """Base of a family's option declaration. Declare fields with `option(...)`."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def option(default: Any, help: str, *, flag: str | None = None, range: str | None = None, **constraints: Any) -> Any:
    """A declared option: its default, one line of help, and pydantic constraints (`ge`, `gt`, `le`, `lt`).

    `flag`: the `qit bench run` flag that also sets it (e.g. `--user-model`), named in its errors. `range`: how
    to say the allowed values where the type and constraints do not say it all (checked by the family)."""
    extra = {k: v for k, v in (("flag", flag), ("range", range)) if v is not None}
    return Field(default, description=help, json_schema_extra=extra or None, **constraints)


@dataclass(frozen=True)
class OptionInfo:
    """One declared option, as `qit bench list --details` and `--json` show it."""

    name: str
    type: str
    default: Any
    range: str
    help: str
    flag: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "type": self.type, "default": self.default, "range": self.range,
                "help": self.help, **({"flag": self.flag} if self.flag else {})}


def describe_options(model: type[BenchmarkOptions]) -> list[OptionInfo]:
    """Every declared option in declaration order."""
    return [_info(name, model) for name in model.model_fields]


def resolve_options(model: type[BenchmarkOptions] | None, given: dict[str, Any], benchmark: str) -> dict[str, Any]:
    """Every declared option with its value (given, else the default), as JSON values.

    `model` None: the family declares no options (a third-party adapter that predates declarations); the given
    options pass through unchecked."""
    if model is None:
        return dict(given)
    raw = {key: _blank_is_unset(model, key, value) for key, value in given.items()}
    try:
        parsed = model.model_validate(raw)
    except ValidationError as exc:
        raise BenchmarkUsageError(_problem(model, exc, raw, benchmark)) from None
    return parsed.model_dump(mode="json")


def _blank_is_unset(model: type[BenchmarkOptions], key: str, value: Any) -> Any:
    """`KEY=` for an option whose default is unset (None) means unset, as before declarations."""
    field = model.model_fields.get(key)
    if field is not None and field.default is None and value == "":
        return None
    return value


def _problem(model: type[BenchmarkOptions], exc: ValidationError, raw: dict[str, Any], benchmark: str) -> str:
    error = exc.errors()[0]
    loc = error.get("loc") or ()
    if error["type"] == "extra_forbidden" or (loc and str(loc[0]) not in model.model_fields):
        return unknown_option(model, str(loc[0]), raw.get(str(loc[0])), benchmark)
    message = str(error["msg"]).removeprefix("Value error, ")
    if not loc:  # a check across options (a model validator): its message says it all
        return message
    info = _info(str(loc[0]), model)
    culprit = _culprit(info, raw.get(info.name))
    if error["type"] == "value_error":  # the family's own check (a field validator) says what is wrong
        return message if message.startswith("--") else f"{culprit}: {message}"
    return f"{culprit}: expected {info.range}"


def unknown_option(model: type[BenchmarkOptions], key: str, value: Any, benchmark: str) -> str:
    names = list(model.model_fields)
    flag = FLAG_OPTIONS.get(key)
    if flag:  # e.g. --user-model for a benchmark without a simulated user
        return f"{flag} {value}: {benchmark} does not take {flag} (it has no option '{key}')"
    culprit = f"--option {key}={value}"
    if not names:
        return f"{culprit}: {benchmark} takes no --option"
    close = difflib.get_close_matches(key, names, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return (f"{culprit}: {benchmark} has no option '{key}'{hint}; its options: {', '.join(names)} "
            "(`qit bench list --details` describes them)")


# options that `qit bench run` flags set, so their errors name the flag the user typed
FLAG_OPTIONS = {key: "--" + key.replace("_", "-") for key in (
    "user_model", "user_temperature", "user_seed", "user_top_p", "user_reasoning_effort", "user_request_timeout",
    "user_max_retries", "user_extra_body")}


def _culprit(info: OptionInfo, value: Any) -> str:
    return f"{info.flag} {value}" if info.flag else f"--option {info.name}={value}"


def _info(name: str, model: type[BenchmarkOptions]) -> OptionInfo:
    field = model.model_fields[name]
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    kind, choices, optional = _kind(field.annotation)
    bounds = []
    for meta in field.metadata:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(meta, attr, None) is not None:
                bounds.append(f"{sign} {getattr(meta, attr)}")
    if extra.get("range"):
        text = str(extra["range"])
    elif choices:
        text = "one of " + ", ".join(str(c) for c in choices)
    else:
        text = {"int": "an integer", "float": "a number", "bool": "true or false (1 or 0)",
                "str": "any text"}.get(kind, kind) + (" " + " and ".join(bounds) if bounds else "")
    if optional and not extra.get("range"):
        text += ", or empty (unset)"
    return OptionInfo(name=name, type=kind, default=field.default, range=text, help=field.description or "",
                      flag=extra.get("flag"))  # type: ignore[arg-type]


def _kind(annotation: Any) -> tuple[str, tuple[Any, ...], bool]:
    """(type name, Literal choices, accepts None) of a field annotation."""
    args = typing.get_args(annotation)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        kind, choices, _ = _kind(inner[0]) if len(inner) == 1 else ("value", (), False)
        return kind, choices, True
    if origin is Literal:
        return "choice", args, False
    return getattr(annotation, "__name__", str(annotation)), (), False
