"""Both sides: the `GaiaQuestion` record (the agent side builds one without its answer, for the prompt), and
reading the user's own GAIA copy (hub layout, jsonl or parquet) into typed questions.

GAIA is gated and must never be reshared, so QitOS ships no GAIA content: it reads a local
copy laid out like the hub repository (`<root>/2023/<split>/metadata.jsonl` or
`metadata.parquet`, attachments beside it) or downloads one with the user's own HF token.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "GaiaDataError",
    "GaiaQuestion",
    "GAIA_SPLITS",
    "UNLABELED_ANSWER",
    "find_split_dir",
    "load_gaia",
    "download_gaia",
]

GAIA_SPLITS = ("validation", "test")
GAIA_YEAR = "2023"
HUB_REPO_ID = "gaia-benchmark/GAIA"
UNLABELED_ANSWER = "?"
_METADATA_FILES = ("metadata.jsonl", "metadata.parquet")


class GaiaDataError(ValueError):
    """The local GAIA copy is missing, laid out wrongly, or has a malformed row."""


class GaiaQuestion(BaseModel):
    """One GAIA question. `final_answer` is None on the unlabeled test split.

    `final_answer` and `annotator_metadata` are reference material: use `agent_view()` for
    anything a model may see.
    """

    model_config = ConfigDict(frozen=True)

    task_id: str
    question: str
    level: Literal[1, 2, 3]
    split: str
    final_answer: str | None = None
    file_name: str | None = None
    file_path: Path | None = None
    annotator_metadata: dict[str, Any] | None = Field(default=None, repr=False)

    @property
    def labeled(self) -> bool:
        return self.final_answer is not None

    def agent_view(self) -> dict[str, Any]:
        """What the agent may see: never the answer or the annotators' solution steps."""
        return {"task_id": self.task_id, "question": self.question, "level": self.level, "file_name": self.file_name}


def find_split_dir(root: Path, split: str) -> Path:
    """Locate the folder holding `split`'s metadata: `<root>/2023/<split>` or `<root>/<split>`."""
    if split not in GAIA_SPLITS:
        raise GaiaDataError(f"unknown GAIA split '{split}'; choose one of {', '.join(GAIA_SPLITS)}")
    root = Path(root).expanduser()
    candidates = [root / GAIA_YEAR / split, root / split]
    if root.name == split:
        candidates.append(root)
    for candidate in candidates:
        if any((candidate / name).is_file() for name in _METADATA_FILES):
            return candidate
    tried = ", ".join(str(c) for c in candidates)
    raise GaiaDataError(
        f"no GAIA {split} metadata (metadata.jsonl or metadata.parquet) found; looked in {tried}. "
        f"Point --root at your own copy laid out like the hub repository ({GAIA_YEAR}/{split}/metadata.jsonl)"
    )


def _read_jsonl(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            where = f"{path}:{number}"
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise GaiaDataError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from exc
            if not isinstance(row, dict):
                raise GaiaDataError(f"{where}: expected a JSON object, got {type(row).__name__}")
            yield where, row


def _read_parquet(path: Path) -> Iterable[tuple[str, dict[str, Any]]]:
    try:
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise GaiaDataError(f"{path}: reading parquet needs pyarrow; install it with `pip install 'qitos[gaia]'`") from exc
    try:
        rows = pq.read_table(path).to_pylist()
    except Exception as exc:  # pyarrow raises several unrelated types for corrupt files
        raise GaiaDataError(f"{path}: cannot read parquet file: {exc}") from exc
    for number, row in enumerate(rows, start=1):
        yield f"{path}: row {number}", row


def _text_field(row: dict[str, Any], key: str, where: str, *, required: bool = True) -> str:
    value = row.get(key)
    if value is None:
        if required:
            raise GaiaDataError(f"{where}: missing field '{key}'")
        return ""
    if not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise GaiaDataError(f"{where}: field '{key}' must be a string, got {type(value).__name__}")
    return str(value)


def _parse_row(row: dict[str, Any], where: str, split: str, split_dir: Path, require_files: bool) -> GaiaQuestion:
    task_id = _text_field(row, "task_id", where).strip()
    if not task_id:
        raise GaiaDataError(f"{where}: field 'task_id' is empty")
    question = _text_field(row, "Question", where)
    level_text = _text_field(row, "Level", where).strip()
    if level_text not in ("1", "2", "3"):
        raise GaiaDataError(f"{where}: field 'Level' must be 1, 2 or 3, got {row.get('Level')!r}")
    answer = _text_field(row, "Final answer", where)
    file_name = _text_field(row, "file_name", where, required=False).strip() or None
    file_path = None
    if file_name:
        if "/" in file_name or "\\" in file_name or file_name in (".", ".."):
            raise GaiaDataError(f"{where}: field 'file_name' must be a plain file name, got {file_name!r}")
        file_path = split_dir / file_name
        if require_files and not file_path.is_file():
            raise GaiaDataError(f"{where}: attachment '{file_name}' is missing; expected it at {file_path}")
    metadata = row.get("Annotator Metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise GaiaDataError(f"{where}: field 'Annotator Metadata' must be an object")
    return GaiaQuestion(
        task_id=task_id,
        question=question,
        level=int(level_text),  # type: ignore[arg-type]
        split=split,
        final_answer=None if answer.strip() == UNLABELED_ANSWER else answer,
        file_name=file_name,
        file_path=file_path,
        annotator_metadata=metadata,
    )


def load_gaia(
    root: Path,
    split: str = "validation",
    *,
    levels: Iterable[int] | None = None,
    require_files: bool = True,
) -> list[GaiaQuestion]:
    """Load one split of a local GAIA copy, optionally keeping only some levels (1, 2, 3).

    `metadata.jsonl` is preferred over `metadata.parquet` when both exist. With
    `require_files`, a row whose attachment is absent is an error naming the row.
    """
    wanted = None if levels is None else {int(level) for level in levels}
    if wanted is not None and not wanted <= {1, 2, 3}:
        raise GaiaDataError(f"GAIA levels are 1, 2 and 3; got {sorted(wanted)}")
    split_dir = find_split_dir(root, split)
    jsonl = split_dir / "metadata.jsonl"
    rows = _read_jsonl(jsonl) if jsonl.is_file() else _read_parquet(split_dir / "metadata.parquet")
    questions: list[GaiaQuestion] = []
    seen: dict[str, str] = {}
    for where, row in rows:
        question = _parse_row(row, where, split, split_dir, require_files)
        if question.task_id in seen:
            raise GaiaDataError(f"{where}: duplicate task_id '{question.task_id}' (first at {seen[question.task_id]})")
        seen[question.task_id] = where
        if wanted is None or question.level in wanted:
            questions.append(question)
    return questions


def _inside_qitos_checkout(path: Path) -> bool:
    """True when `path` lies in the QitOS source tree, where GAIA content must never land."""
    repo = Path(__file__).resolve().parents[3]
    if not (repo / ".git").exists():
        return False
    return path.resolve().is_relative_to(repo)


def download_gaia(target: Path, *, token: str | None = None, revision: str | None = None) -> Path:
    """Download the hub copy of GAIA into `target` with the user's HF token; returns `target`.

    Needs `huggingface_hub` (installed with `datasets`), network access, a token (argument,
    `HF_TOKEN` or `HUGGING_FACE_HUB_TOKEN`) and accepted dataset terms on the hub.
    """
    target = Path(target).expanduser()
    if _inside_qitos_checkout(target):
        raise GaiaDataError(f"refusing to download GAIA into {target}: it is inside the QitOS source tree")
    token = token or os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN")
    if not token:
        raise GaiaDataError(
            "downloading GAIA needs a Hugging Face token: accept the terms at the dataset page of "
            f"{HUB_REPO_ID}, then set HF_TOKEN (or pass token=...)"
        )
    if os.environ.get("HF_HUB_OFFLINE") == "1":
        raise GaiaDataError("cannot download GAIA: HF_HUB_OFFLINE=1 is set; use a local copy with --root instead")
    try:
        from huggingface_hub import snapshot_download
    except ImportError as exc:
        raise GaiaDataError(
            "downloading GAIA needs huggingface_hub; install it with `pip install datasets` "
            "or use a local copy with --root"
        ) from exc
    try:
        snapshot_download(
            repo_id=HUB_REPO_ID,
            repo_type="dataset",
            revision=revision,
            token=token,
            local_dir=str(target),
            allow_patterns=[f"{GAIA_YEAR}/*"],
        )
    except Exception as exc:  # network, auth and gating errors come in many types
        raise GaiaDataError(
            f"downloading GAIA from the hub failed (offline, bad token or terms not accepted?): {exc}"
        ) from exc
    return target
