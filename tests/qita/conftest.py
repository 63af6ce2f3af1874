"""Fixtures for the board tests: one corpus per session, a live board, a headless Chromium."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from qitos.qita.app import build_app
from qitos.qita.config import BoardConfig

from .corpus import Corpus, build_corpus
from tests.conftest import require_system

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts" / "qita"
CHROMIUM = os.environ.get("QITA_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> Corpus:
    return build_corpus(tmp_path_factory.mktemp("qita"))


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("qita-cache")


@pytest.fixture
def client(corpus, cache_dir) -> TestClient:
    config = BoardConfig(logdir=corpus.logdir, results=corpus.results, cache_dir=cache_dir)
    app = build_app(config)
    with TestClient(app, base_url="http://127.0.0.1") as c:
        yield c
    app.state.board.index.close()


@pytest.fixture(scope="session")
def board_server(corpus, cache_dir):
    from qitos.qita.server import BoardServer

    server = BoardServer(BoardConfig(logdir=corpus.logdir, results=corpus.results, port=0, cache_dir=cache_dir)).start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser():
    require_system(Path(CHROMIUM).exists(), f"Chromium at {CHROMIUM} (set QITA_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    """A fresh page that records every dialog (alert/confirm) and every console error."""
    context = browser.new_context(viewport={"width": 1360, "height": 900})
    pg = context.new_page()
    pg.dialogs = []
    pg.errors = []
    pg.on("dialog", lambda d: (pg.dialogs.append(d.message), d.dismiss()))
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    context.close()


def screenshot(pg, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    for img in pg.locator("img[loading=lazy]").all():  # load lazy images so the shot shows them
        img.scroll_into_view_if_needed()
    pg.wait_for_load_state("networkidle")
    pg.screenshot(path=str(path), full_page=True)
    return path
