"""Fixtures of the OpenAI-compatible client tests: a real chat server on loopback and an API key to find."""

import pytest

from tests.support.openai_server import TEST_KEY, OpenAIServer


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


@pytest.fixture
def key(monkeypatch):
    """The name of an environment variable holding `TEST_KEY` (a canary: it must never reach a trace)."""
    monkeypatch.setenv("QITOS_TEST_KEY", TEST_KEY)
    return "QITOS_TEST_KEY"
