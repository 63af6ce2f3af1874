"""Every page over HTTP (no browser): bad input is a marker not a 500, text is escaped, the guard holds."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from qitos.qita.app import build_app
from qitos.qita.config import BoardConfig, BoardConfigError

from .corpus import XSS_IMG, XSS_SCRIPT, tree_digest


def test_every_page_renders_for_every_run(client, corpus):
    before = tree_digest(corpus.logdir)
    for url in ("/", "/runs", "/benchmarks", "/benchmarks/jsonl"):
        assert client.get(url).status_code == 200, url
    for name in corpus.runs.values():
        for url in (f"/runs/{name}", f"/runs/{name}/replay", f"/runs/{name}/export.html"):
            response = client.get(url)
            assert response.status_code == 200, (url, response.text[:500])
    for role in ("corrupt", "invalid", "torn", "interrupted"):
        compare = client.get(f"/compare?a={corpus.runs[role]}&b={corpus.runs['pair_a']}")
        assert compare.status_code == 200, role
    assert client.get("/experiment").status_code == 200
    assert client.get("/healthz").json()["runs"] >= 20
    assert tree_digest(corpus.logdir) == before  # read-only: nothing written into the logdir


def test_bad_runs_show_a_clear_marker(client, corpus):
    listing = client.get("/runs?per_page=200").text
    assert "corrupt manifest.json" in listing and "exploded" in listing
    corrupt = client.get(f"/runs/{corpus.runs['corrupt']}").text
    assert "corrupt manifest.json" in corrupt and "step 1" in corrupt  # steps still shown
    invalid = client.get(f"/runs/{corpus.runs['invalid']}").text
    assert "does not match the trace schema" in invalid
    torn = client.get(f"/runs/{corpus.runs['torn']}").text
    assert "steps.jsonl line 5" in torn and "still being written, or torn by a crash" in torn
    live = client.get(f"/runs/{corpus.runs['live']}").text
    assert "still being written" in live
    assert "was interrupted" in client.get(f"/runs/{corpus.runs['interrupted']}").text


def test_trace_text_is_escaped_everywhere(client, corpus):
    name = corpus.runs["xss"]
    pages = [client.get(u).text for u in (f"/runs/{name}", f"/runs/{name}/replay?step=2", f"/runs/{name}/replay/frame/3",
                                          f"/runs?q=xss", f"/compare?a={name}&b={corpus.runs['pair_a']}",
                                          f"/runs/{name}/export.html")]
    for html in pages:
        assert "<script>alert" not in html and "<img src=x" not in html
    run_page = pages[0]
    assert "&lt;script&gt;alert(&#39;xss-script&#39;)&lt;/script&gt;" in run_page
    assert "&lt;img src=x onerror=alert(&#39;xss-img&#39;)&gt;" in run_page
    assert XSS_SCRIPT not in run_page and XSS_IMG not in run_page
    # the only scripts are the board's own files; CSP forbids inline script anyway
    assert set(re.findall(r"<script[^>]*>", run_page)) == {'<script src="/static/board.js">'}
    csp = client.get(f"/runs/{name}").headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]


@pytest.mark.parametrize("path", [
    "../../../../etc/passwd", "..%2F..%2F..%2Fetc%2Fpasswd", "%2e%2e/%2e%2e/etc/passwd", "screens/../../manifest.json",
    "/etc/passwd", "screens/nope.png", "screens", "screens/step1.png%00.txt",
])
def test_traversal_and_missing_files_are_404(client, corpus, path):
    response = client.get(f"/runs/{corpus.runs['pair_a']}/files/{path}")
    assert response.status_code == 404 and "root:" not in response.text


def test_files_of_a_run_are_served_safely(client, corpus, tmp_path):
    run = corpus.runs["pair_a"]
    shot = client.get(f"/runs/{run}/files/screens/step1.png")
    assert shot.status_code == 200 and shot.headers["content-type"] == "image/png"
    assert shot.content.startswith(b"\x89PNG") and "sandbox" in shot.headers["content-security-policy"]
    manifest = client.get(f"/runs/{run}/files/manifest.json")  # not an image: download only, never rendered
    assert manifest.headers["content-type"] == "application/octet-stream"
    assert manifest.headers["content-disposition"].startswith("attachment")
    for bad in ("%2e%2e", ".hidden", quote("a/b", safe=""), "x" * 300, "not-a-run"):
        assert client.get(f"/runs/{bad}").status_code == 404, bad
    assert client.get("/runs/no-such-run").status_code == 404
    assert client.get("/runs/no-such-run/files/x.png").status_code == 404


def test_symlink_out_of_a_run_is_404(corpus, cache_dir, tmp_path):
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"\x89PNG secret")
    link = corpus.logdir / corpus.runs["budget"] / "escape.png"
    link.symlink_to(secret)
    try:
        app = build_app(BoardConfig(logdir=corpus.logdir, cache_dir=cache_dir))
        with TestClient(app, base_url="http://127.0.0.1") as c:
            assert c.get(f"/runs/{corpus.runs['budget']}/files/escape.png").status_code == 404
        app.state.board.index.close()
    finally:
        link.unlink()


def test_board_is_read_only_and_checks_the_host(client):
    for method in ("post", "put", "delete", "patch"):
        response = getattr(client, method)("/")
        assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD"
    rebinding = client.get("/", headers={"host": "evil.example:8765"})
    assert rebinding.status_code == 421


def test_non_loopback_requires_a_token(corpus, cache_dir):
    with pytest.raises(BoardConfigError, match="needs --token"):
        BoardConfig(logdir=corpus.logdir, host="0.0.0.0", cache_dir=cache_dir).validate()
    with pytest.raises(BoardConfigError, match="--token must be"):
        BoardConfig(logdir=corpus.logdir, host="0.0.0.0", token="a;b", cache_dir=cache_dir).validate()
    token = "s3cret-token-for-tests"
    app = build_app(BoardConfig(logdir=corpus.logdir, host="0.0.0.0", token=token, cache_dir=cache_dir))
    with TestClient(app, base_url="http://192.0.2.10:8765") as c:
        denied = c.get("/")
        assert denied.status_code == 401 and "token" in denied.text and "<" not in denied.text
        assert c.get(f"/static/board.css").status_code == 401
        assert c.get("/?token=wrong").status_code == 401
        assert c.get("/", headers={"x-qita-token": token}).status_code == 200
        assert c.get("/", headers={"authorization": f"Bearer {token}"}).status_code == 200
        first = c.get(f"/?token={token}")
        assert first.status_code == 200 and "HttpOnly" in first.headers["set-cookie"]
        assert c.get("/experiment").status_code == 200  # the cookie carries it from now on
        c.cookies.clear()
        assert c.get("/experiment").status_code == 401
    app.state.board.index.close()


def test_experiment_page_shows_metrics_grid_and_paired_comparison(client, corpus):
    html = client.get("/experiment?f=0&f=1").text
    assert "Paired comparison" in html and "oracle.jsonl" in html and "half.jsonl" in html
    for cell, count in (("both", 3), ("only-a", 3), ("only-b", 0), ("neither", 0)):
        assert re.search(rf'id="{cell}"[^>]*>[^<]*<strong>{count}</strong>', html), cell
    assert "p = 0.2500" in html and "exact binomial" in html and "pass^1" in html
    assert html.count('href="/runs/jsonl_') >= 12  # every grid cell links to its trace
    single = client.get("/experiment?f=1").text
    assert "Paired comparison" not in single and "3 / 6" in single
    assert client.get("/experiment?f=7").status_code == 200  # unknown file numbers are ignored


def test_long_run_is_paginated(client, corpus):
    name = corpus.runs["long"]
    first = client.get(f"/runs/{name}").text
    assert 'id="step-25"' in first and 'id="step-26"' not in first and "steps page 1 of 3" in first
    third = client.get(f"/runs/{name}?page=3").text
    assert 'id="step-60"' in third and 'id="step-1"' not in third
    assert client.get(f"/runs/{name}?page=999").status_code == 200  # clamped to the last page


def test_a_run_being_written_updates_live(tmp_path):
    from qitos.trace.schema import RunSummary
    from qitos.trace.writer import TraceWriter

    logdir = tmp_path / "runs"
    writer = TraceWriter(logdir, "live_t_0_20260101T000000_aaaaaa", fsync=False)
    writer.update(task={"id": "growing", "objective": "grow"})
    writer.write_manifest()
    app = build_app(BoardConfig(logdir=logdir, cache_dir=tmp_path / "cache", refresh_seconds=0))
    with TestClient(app, base_url="http://127.0.0.1") as c:
        assert "status-running" in c.get("/runs").text
        page = c.get(f"/runs/{writer.run_id}").text
        assert 'id="live-reload"' in page and "No steps recorded" in page
        writer.event("model_request", "DECIDE", {"message_count": 1}, step_id=1)
        writer.step({"step_id": 1, "observation": ["first observation"], "decision": {"mode": "act", "actions": []}})
        page = c.get(f"/runs/{writer.run_id}").text
        assert "first observation" in page and "1 events" in page
        assert "step 1 / 1" in c.get(f"/runs/{writer.run_id}/replay").text
        writer.finalize("completed", RunSummary(stop_reason="final", final_result="grown", steps=1))
        listing = c.get("/runs").text
        assert "status-completed" in listing and "status-running" not in listing
        assert 'id="live-reload"' not in c.get(f"/runs/{writer.run_id}").text
    app.state.board.index.close()


def test_compare_suggests_runs_of_the_same_task(client, corpus):
    html = client.get(f"/compare?a={corpus.runs['pair_a']}").text
    assert "Other runs of the same task" in html
    assert f"b={corpus.runs['pair_b']}" in html and corpus.runs["xss"] not in html
