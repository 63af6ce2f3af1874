"""Scoring side (gold): load and validate OSWorld task files (test_all.json / test_small.json + examples/<domain>/<id>.json).

Data stays outside the package: callers pass the data root (`<QITOS_DATA_DIR>/osworld`, or the
`evaluation_examples` folder itself). Every task is validated into pydantic records at load time so a broken
file fails early with the file and the field named, instead of failing mid-run inside the VM.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from qitos.benchmark.osworld.config import SetupStep
from qitos.benchmark.osworld.errors import TaskFormatError

SPLITS: tuple[str, ...] = ("test_all", "test_small")
ID_PREFIX = "osworld"

# Fields a getter config cannot work without; checked at load time so typos surface early.
_REQUIRED_GETTER_FIELDS: dict[str, tuple[str, ...]] = {
    "vm_file": ("path", "dest"),
    "cloud_file": ("path", "dest"),
    "cache_file": ("path",),
    "rule": ("rules",),
    "rule_relativeTime": ("rules",),
    "vm_command_line": ("command",),
    "vm_command_error": ("command",),
    "list_directory": ("path",),
    "gimp_config_file": ("file_name",),
    "vm_window_size": ("app_class_name",),
}


class GetterConfig(BaseModel):
    """A `result`/`expected` entry: `type` picks the getter, the other keys are its arguments."""

    model_config = ConfigDict(extra="allow")

    type: str = Field(min_length=1)

    @model_validator(mode="after")
    def _required_fields(self) -> "GetterConfig":
        missing = [f for f in _REQUIRED_GETTER_FIELDS.get(self.type, ()) if f not in self.arguments]
        if missing:
            raise ValueError(f"getter '{self.type}' needs field(s) {', '.join(missing)}")
        return self

    @property
    def arguments(self) -> dict[str, Any]:
        """The getter's keyword arguments (everything except `type`)."""
        return dict(self.model_extra or {})

    def get(self, name: str, default: Any = None) -> Any:
        return self.arguments.get(name, default)


class MetricSpec(BaseModel):
    """One metric call after list-valued evaluator fields are lined up: metric(result, expected, **options)."""

    func: str
    result: GetterConfig | None = None
    expected: GetterConfig | None = None
    options: dict[str, Any] = Field(default_factory=dict)


class Evaluator(BaseModel):
    """The task's scoring recipe; list-valued `func` pairs index-wise with list-valued result/expected/options."""

    model_config = ConfigDict(extra="forbid")

    func: str | list[str]
    conj: Literal["and", "or"] = "and"
    result: GetterConfig | list[GetterConfig] | None = None
    expected: GetterConfig | list[GetterConfig | None] | None = None
    options: dict[str, Any] | list[dict[str, Any]] | None = None
    postconfig: list[SetupStep] = Field(default_factory=list)

    @model_validator(mode="after")
    def _lists_line_up(self) -> "Evaluator":
        if isinstance(self.func, list):
            if not self.func:
                raise ValueError("func is an empty list")
            for name in ("result", "expected", "options"):
                value = getattr(self, name)
                if isinstance(value, list) and len(value) != len(self.func):
                    raise ValueError(f"{name} has {len(value)} entries but func has {len(self.func)}")
        else:
            for name in ("result", "expected", "options"):
                if isinstance(getattr(self, name), list):
                    raise ValueError(f"{name} is a list but func is a single metric")
        return self

    @property
    def funcs(self) -> list[str]:
        return list(self.func) if isinstance(self.func, list) else [self.func]

    @property
    def is_infeasible(self) -> bool:
        return self.func == "infeasible"

    def metric_specs(self) -> list[MetricSpec]:
        """Line up func/result/expected/options; a single (non-list) value is shared by every metric."""
        specs = []
        for index, func in enumerate(self.funcs):
            specs.append(
                MetricSpec(
                    func=func,
                    result=_pick(self.result, index),
                    expected=_pick(self.expected, index),
                    options=_pick(self.options, index) or {},
                )
            )
        return specs

    def getter_types(self) -> set[str]:
        found: set[str] = set()
        for spec in self.metric_specs():
            found.update(g.type for g in (spec.result, spec.expected) if g is not None)
        return found


def _pick(value: Any, index: int) -> Any:
    return value[index] if isinstance(value, list) else value


class OSWorldTask(BaseModel):
    """One OSWorld example; `task_id` (`osworld-<domain>-<id>`) is the id QitOS uses everywhere."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    domain: str
    snapshot: str
    instruction: str = Field(min_length=1)
    source: str | list[str] = ""
    related_apps: list[str] = Field(default_factory=list)
    config: list[SetupStep] = Field(default_factory=list)
    trajectory: str | None = None
    evaluator: Evaluator
    path: Path | None = Field(default=None, exclude=True)

    @property
    def task_id(self) -> str:
        return f"{ID_PREFIX}-{self.domain}-{self.id}"


def resolve_examples_dir(data_root: Path | str) -> Path:
    """Accept `<data>/osworld` or its `evaluation_examples` folder; fail clearly when neither holds the tasks."""
    root = Path(data_root).expanduser()
    for candidate in (root / "evaluation_examples", root):
        if (candidate / "test_all.json").is_file() and (candidate / "examples").is_dir():
            return candidate
    raise TaskFormatError(
        f"no OSWorld task data under {root}: expected evaluation_examples/test_all.json and "
        "evaluation_examples/examples/ (run `qit data fetch osworld` or set QITOS_DATA_DIR)"
    )


def load_split_index(data_root: Path | str, split: str = "test_all") -> dict[str, list[str]]:
    """Read `<split>.json` (domain -> example ids)."""
    if split not in SPLITS:
        raise TaskFormatError(f"unknown OSWorld split '{split}'; choose one of {', '.join(SPLITS)}")
    path = resolve_examples_dir(data_root) / f"{split}.json"
    data = _read_json(path)
    if not isinstance(data, dict):
        raise TaskFormatError(f"{path}: expected an object mapping domain -> list of ids")
    index: dict[str, list[str]] = {}
    for domain, ids in data.items():
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise TaskFormatError(f"{path}: field '{domain}' must be a list of task id strings")
        index[domain] = ids
    return index


def load_task_file(path: Path | str, domain: str | None = None) -> OSWorldTask:
    """Validate one example file; the domain defaults to its parent folder name."""
    path = Path(path)
    data = _read_json(path)
    if not isinstance(data, dict):
        raise TaskFormatError(f"{path}: a task file must hold a JSON object")
    domain = domain or path.parent.name
    try:
        task = OSWorldTask.model_validate({**data, "domain": domain, "path": path})
    except ValidationError as exc:
        raise TaskFormatError(_format_validation_error(path, exc)) from None
    expected_stem = path.name.split(".json")[0]
    if task.id != expected_stem:
        raise TaskFormatError(f"{path}: field 'id' is '{task.id}' but the file is named '{path.name}'")
    return task


def load_tasks(
    data_root: Path | str,
    split: str = "test_all",
    *,
    domains: Iterable[str] | None = None,
    ids: Iterable[str] | None = None,
) -> list[OSWorldTask]:
    """Load a split, optionally keeping only some domains (the subset) and some task ids.

    `ids` accepts `osworld-<domain>-<uuid>`, `<domain>/<uuid>` or a bare `<uuid>`; an id or domain that is
    not in the split is an error, never a silent empty selection.
    """
    examples = resolve_examples_dir(data_root)
    index = load_split_index(examples, split)
    wanted_domains = _check_domains(index, domains, split)
    wanted_ids = _normalise_ids(index, ids, split) if ids is not None else None
    tasks = []
    for domain in wanted_domains:
        for example_id in index[domain]:
            if wanted_ids is not None and (domain, example_id) not in wanted_ids:
                continue
            path = examples / "examples" / domain / f"{example_id}.json"
            if not path.is_file():
                raise TaskFormatError(f"{examples / (split + '.json')}: task {domain}/{example_id} has no file {path}")
            tasks.append(load_task_file(path, domain))
    return tasks


def _check_domains(index: dict[str, list[str]], domains: Iterable[str] | None, split: str) -> list[str]:
    if domains is None:
        return list(index)
    chosen = list(dict.fromkeys(domains))
    unknown = [d for d in chosen if d not in index]
    if unknown:
        raise TaskFormatError(f"unknown OSWorld domain(s) {unknown} for split {split}; known: {sorted(index)}")
    return chosen


def _normalise_ids(index: dict[str, list[str]], ids: Iterable[str], split: str) -> set[tuple[str, str]]:
    by_uuid = {example_id: domain for domain, values in index.items() for example_id in values}
    chosen: set[tuple[str, str]] = set()
    unknown = []
    for raw in ids:
        key = _parse_id(raw, index, by_uuid)
        if key is None:
            unknown.append(raw)
        else:
            chosen.add(key)
    if unknown:
        raise TaskFormatError(f"task id(s) not in OSWorld split {split}: {unknown}")
    return chosen


def _parse_id(raw: str, index: dict[str, list[str]], by_uuid: dict[str, str]) -> tuple[str, str] | None:
    if raw.startswith(ID_PREFIX + "-"):
        rest = raw[len(ID_PREFIX) + 1 :]
        for domain in sorted(index, key=len, reverse=True):
            if rest.startswith(domain + "-") and rest[len(domain) + 1 :] in index[domain]:
                return domain, rest[len(domain) + 1 :]
        return None
    if "/" in raw:
        domain, _, example_id = raw.partition("/")
        return (domain, example_id) if example_id in index.get(domain, []) else None
    return (by_uuid[raw], raw) if raw in by_uuid else None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskFormatError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise TaskFormatError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def _format_validation_error(path: Path, exc: ValidationError) -> str:
    """One line per problem; union-branch tags (`function-after[...]`, `list[...]`) are dropped from paths."""
    lines = [f"{path}: invalid OSWorld task"]
    seen: set[str] = set()
    for error in exc.errors():
        parts = [str(part) for part in error["loc"] if "[" not in str(part)]
        line = f"  field '{'.'.join(parts) or '<root>'}': {error['msg']}"
        if line not in seen:
            seen.add(line)
            lines.append(line)
    if len(lines) > 11:
        lines = lines[:11] + [f"  ... and {len(lines) - 11} more"]
    return "\n".join(lines)
