"""Loading a local GAIA copy: layouts, jsonl and parquet, levels, unlabeled test rows, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from qitos.benchmark.gaia import GaiaDataError, download_gaia, load_gaia
from qitos.benchmark.gaia.dataset import find_split_dir

from .make_fixture import QUESTIONS, TEST_QUESTIONS, build_gaia_fixture
from tests.conftest import require_system


@pytest.fixture(scope="module")
def gaia_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_gaia_fixture(tmp_path_factory.mktemp("gaia"))


def _write_rows(folder: Path, lines: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "metadata.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder / "metadata.jsonl"


def _row(**overrides: object) -> str:
    row = {"task_id": "t1", "Question": "q?", "Level": "1", "Final answer": "4", "file_name": ""}
    row.update(overrides)
    return json.dumps({k: v for k, v in row.items() if v is not ...})


def test_validation_split_loads(gaia_root: Path) -> None:
    questions = load_gaia(gaia_root, "validation")
    assert [q.task_id for q in questions] == [q[0] for q in QUESTIONS]
    assert {q.level for q in questions} == {1, 2, 3}
    first = questions[0]
    assert first.question.startswith("According to the attached shopping list")
    assert first.final_answer == "7" and first.labeled and first.split == "validation"
    assert first.file_path == gaia_root / "2023" / "validation" / "shopping_list.txt"
    assert first.annotator_metadata and first.annotator_metadata["Number of tools"] == "1"
    no_file = next(q for q in questions if q.task_id.endswith("14"))
    assert no_file.file_name is None and no_file.file_path is None


def test_agent_view_hides_reference_material(gaia_root: Path) -> None:
    question = load_gaia(gaia_root)[0]
    view = question.agent_view()
    assert set(view) == {"task_id", "question", "level", "file_name"}
    assert "7" not in json.dumps(view) and "annotator" not in repr(question).lower()


def test_level_filter(gaia_root: Path) -> None:
    level3 = load_gaia(gaia_root, levels=[3])
    assert level3 and all(q.level == 3 for q in level3)
    assert len(load_gaia(gaia_root, levels=[1, 2])) + len(level3) == len(QUESTIONS)
    with pytest.raises(GaiaDataError, match="levels are 1, 2 and 3"):
        load_gaia(gaia_root, levels=[4])


def test_test_split_is_unlabeled(gaia_root: Path) -> None:
    questions = load_gaia(gaia_root, "test")
    assert len(questions) == len(TEST_QUESTIONS)
    assert all(q.final_answer is None and not q.labeled for q in questions)
    assert questions[0].file_path == gaia_root / "2023" / "test" / "timetable.txt"


def test_parquet_copy_matches_jsonl(tmp_path: Path, gaia_root: Path) -> None:
    root = build_gaia_fixture(tmp_path, fmt="parquet")
    assert not (root / "2023" / "validation" / "metadata.jsonl").exists()
    from_parquet = load_gaia(root, "validation")
    from_jsonl = load_gaia(gaia_root, "validation")
    assert [q.model_dump(exclude={"file_path"}) for q in from_parquet] == [
        q.model_dump(exclude={"file_path"}) for q in from_jsonl]
    assert all(q.final_answer is None for q in load_gaia(root, "test"))


def test_root_may_point_at_the_year_folder_or_the_split(gaia_root: Path) -> None:
    year = gaia_root / "2023"
    assert find_split_dir(year, "validation") == year / "validation"
    assert find_split_dir(year / "test", "test") == year / "test"
    assert len(load_gaia(year, "test")) == len(TEST_QUESTIONS)


def test_unknown_split_and_missing_copy(tmp_path: Path) -> None:
    with pytest.raises(GaiaDataError, match="unknown GAIA split 'dev'"):
        load_gaia(tmp_path, "dev")
    with pytest.raises(GaiaDataError, match=r"no GAIA validation metadata .*--root"):
        load_gaia(tmp_path / "nowhere")


@pytest.mark.parametrize(
    "line,message",
    [
        ("{not json", r"metadata.jsonl:2: not valid JSON"),
        ("[1, 2]", r"metadata.jsonl:2: expected a JSON object"),
        (_row(task_id="t2", Question=...), r"metadata.jsonl:2: missing field 'Question'"),
        (_row(task_id="t2", Level="4"), r"metadata.jsonl:2: field 'Level' must be 1, 2 or 3"),
        (_row(task_id="t2", Question=["a"]), r"metadata.jsonl:2: field 'Question' must be a string"),
        (_row(task_id=""), r"metadata.jsonl:2: field 'task_id' is empty"),
        (_row(), r"metadata.jsonl:2: duplicate task_id 't1' \(first at .*metadata.jsonl:1\)"),
        (_row(task_id="t2", file_name="../secret.txt"), r"metadata.jsonl:2: field 'file_name' must be a plain"),
        (_row(task_id="t2", file_name="gone.pdf"), r"metadata.jsonl:2: attachment 'gone.pdf' is missing"),
        (_row(task_id="t2", **{"Annotator Metadata": "text"}), r"metadata.jsonl:2: field 'Annotator Metadata'"),
    ],
)
def test_malformed_rows_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    _write_rows(tmp_path / "2023" / "validation", [_row(), line])
    with pytest.raises(GaiaDataError, match=message):
        load_gaia(tmp_path)


def test_blank_lines_are_skipped_and_numbers_stay_true(tmp_path: Path) -> None:
    _write_rows(tmp_path / "2023" / "validation", [_row(), "", _row(task_id="t2", Level=2, **{"Final answer": 5})])
    questions = load_gaia(tmp_path)
    assert [(q.level, q.final_answer) for q in questions] == [(1, "4"), (2, "5")]


def test_missing_attachment_allowed_when_not_required(tmp_path: Path) -> None:
    _write_rows(tmp_path / "2023" / "validation", [_row(file_name="gone.pdf")])
    question = load_gaia(tmp_path, require_files=False)[0]
    assert question.file_path == tmp_path / "2023" / "validation" / "gone.pdf"


def test_corrupt_parquet_names_the_file(tmp_path: Path) -> None:
    folder = tmp_path / "2023" / "validation"
    folder.mkdir(parents=True)
    (folder / "metadata.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(GaiaDataError, match=r"metadata.parquet: cannot read parquet"):
        load_gaia(tmp_path)


def test_download_needs_a_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
    with pytest.raises(GaiaDataError, match="needs a Hugging Face token"):
        download_gaia(tmp_path / "gaia")


def test_download_refuses_offline_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(GaiaDataError, match="HF_HUB_OFFLINE"):
        download_gaia(tmp_path / "gaia", token="hf_fake")


def test_download_refuses_the_source_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parents[2]
    require_system((repo / ".git").exists(), "a git checkout of QitOS")
    with pytest.raises(GaiaDataError, match="inside the QitOS source tree"):
        download_gaia(repo / "data" / "gaia", token="hf_fake")


def test_download_without_huggingface_hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setitem(__import__("sys").modules, "huggingface_hub", None)
    with pytest.raises(GaiaDataError, match="needs huggingface_hub"):
        download_gaia(tmp_path / "gaia", token="hf_fake")


def test_download_failure_is_wrapped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    calls: list[dict[str, object]] = []

    def failing_snapshot(**kwargs: object) -> str:
        calls.append(kwargs)
        raise OSError("connection refused")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    fake = types.ModuleType("huggingface_hub")
    fake.snapshot_download = failing_snapshot  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "huggingface_hub", fake)
    with pytest.raises(GaiaDataError, match="connection refused"):
        download_gaia(tmp_path / "gaia", token="hf_fake")
    assert calls[0]["repo_id"] == "gaia-benchmark/GAIA" and calls[0]["repo_type"] == "dataset"
    assert calls[0]["token"] == "hf_fake"
