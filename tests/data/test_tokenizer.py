"""The offline encodings: the npm ranks convert to exactly the files tiktoken expects (cl100k_base, o200k_base),
count as tiktoken does, and each model name gets the encoding upstream CyBench's pinned tiktoken picks."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from qitos.models import tokenizer
from tests.conftest import require_tokenizer


def test_npm_compact_ranks_convert_to_tiktoken_lines():
    compact = "! 0 IQ== Ig==\n! 5 Iw==\n"
    assert tokenizer.ranks_from_npm(compact) == b"IQ== 0\nIg== 1\nIw== 5\n"


def test_pinned_hashes_are_the_ones_tiktoken_itself_expects():
    import tiktoken_ext.openai_public as public

    source = Path(public.__file__).read_text()
    for name, spec in tokenizer.ENCODINGS.items():
        found = re.search(re.escape(spec.url) + r'",\s*expected_hash="([0-9a-f]{64})"', source)
        assert found and found.group(1) == spec.sha256, name


@pytest.mark.parametrize(("name", "ids"), [("cl100k_base", [15339, 1917]), ("o200k_base", [24912, 2375])])
def test_installed_ranks_are_tiktokens_own_and_count_tokens(name, ids):
    encoding = require_tokenizer(name)
    path = tokenizer.ranks_path(name=name)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == tokenizer.ENCODINGS[name].sha256
    assert encoding.name == name
    assert encoding.encode("hello world") == ids  # the encoding's ids, as published
    text = "push button 'OK' (120, 88) ~ 你好 " * 50
    assert encoding.decode(encoding.encode(text)) == text


def test_unmodified_tiktoken_finds_the_ranks_through_its_cache(tmp_path):
    """Upstream's code calls tiktoken.encoding_for_model(...) itself: with TIKTOKEN_CACHE_DIR set it works."""
    require_tokenizer("cl100k_base")
    require_tokenizer("o200k_base")
    code = ("import tiktoken; print(len(tiktoken.encoding_for_model('gpt-4').encode('a11y tree 你好')), "
            "len(tiktoken.encoding_for_model('gpt-4o-2024-05-13').encode('a11y tree 你好')))")
    env = {"TIKTOKEN_CACHE_DIR": str(tokenizer.cache_dir()), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "HTTPS_PROXY": "http://127.0.0.1:9"}  # no network: a download attempt would fail
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    counts = [int(n) for n in out.stdout.split()]
    assert counts == [len(tokenizer.gpt4_encoding().encode("a11y tree 你好")),
                      len(tokenizer.encoding_for_model("gpt-4o-2024-05-13").encode("a11y tree 你好"))]


@pytest.mark.parametrize(("model", "name"), [
    ("gpt-4o-2024-05-13", "o200k_base"), ("gpt-4o", "o200k_base"), ("gpt-4o-mini", "o200k_base"),
    # names tiktoken 0.7.0 (upstream's pin) does not know: upstream's KeyError fallback, gpt-4's encoding
    ("o1-mini-2024-09-12", "cl100k_base"), ("gpt-4.1-mini", "cl100k_base"), ("chatgpt-4o-latest", "cl100k_base"),
    ("ft:gpt-4o-mini:org::x", "cl100k_base"), ("claude-3-5-sonnet-20240620", "cl100k_base"),
    ("gpt-4-0613", "cl100k_base"), ("gpt-3.5-turbo-0125", "cl100k_base"), ("scripted:replies.jsonl", "cl100k_base"),
])
def test_each_model_counts_with_the_encoding_upstream_picks(model, name):
    assert tokenizer.encoding_name_for_model(model) == name


def test_missing_ranks_name_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv(tokenizer.TIKTOKEN_ENV, str(tmp_path))
    monkeypatch.delenv("TIKTOKEN_CACHE_DIR", raising=False)
    for name in tokenizer.ENCODINGS:
        with pytest.raises(tokenizer.TokenizerMissing, match=f"{name}.*qit data fetch tokenizer"):
            tokenizer.activate(name)
    with pytest.raises(tokenizer.TokenizerMissing, match="o200k_base.*qit data fetch tokenizer"):
        tokenizer.encoding_for_model("gpt-4o-2024-05-13")
