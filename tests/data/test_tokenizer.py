"""The offline gpt-4 encoding: the npm ranks convert to exactly the file tiktoken expects, and count as tiktoken does."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from qitos.benchmark import tokenizer
from tests.conftest import require_tokenizer


def test_npm_compact_ranks_convert_to_tiktoken_lines():
    compact = "! 0 IQ== Ig==\n! 5 Iw==\n"
    assert tokenizer.ranks_from_npm(compact) == b"IQ== 0\nIg== 1\nIw== 5\n"


def test_installed_ranks_are_tiktokens_own_and_count_tokens():
    encoding = require_tokenizer()
    path = tokenizer.ranks_path()
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tokenizer.RANKS_SHA256
    assert encoding.name == "cl100k_base"
    assert encoding.encode("hello world") == [15339, 1917]  # cl100k_base's ids, as published
    text = "push button 'OK' (120, 88) ~ " * 50
    assert encoding.decode(encoding.encode(text)) == text


def test_unmodified_tiktoken_finds_the_ranks_through_its_cache(tmp_path):
    """Upstream's code calls tiktoken.encoding_for_model("gpt-4") itself: with TIKTOKEN_CACHE_DIR set it works."""
    require_tokenizer()
    code = "import tiktoken; print(len(tiktoken.encoding_for_model('gpt-4').encode('a11y tree')))"
    env = {"TIKTOKEN_CACHE_DIR": str(tokenizer.cache_dir()), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "HTTPS_PROXY": "http://127.0.0.1:9"}  # no network: a download attempt would fail
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) == len(tokenizer.gpt4_encoding().encode("a11y tree"))


def test_missing_ranks_name_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv(tokenizer.TIKTOKEN_ENV, str(tmp_path))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    try:
        tokenizer.activate()
    except tokenizer.TokenizerMissing as exc:
        assert "qit data fetch tokenizer" in str(exc)
    else:
        raise AssertionError("activate() found ranks in an empty folder")
