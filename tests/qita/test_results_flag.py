"""`qita board --results a.jsonl b.jsonl`, as the README writes it, opens both files on the Experiment page."""

from __future__ import annotations

from tests.support.board import board, page


def test_board_takes_several_results_files_after_one_flag(corpus, tmp_path):
    oracle, half = corpus.results
    with board("--logdir", str(corpus.logdir), "--results", str(oracle), str(half), "--cache-dir", str(tmp_path / "c"),
               cwd=tmp_path) as url:
        body = page(url + "/experiment", timeout=10)
    assert oracle.name in body and half.name in body
