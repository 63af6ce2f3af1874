"""Links the agent plants in its work dir (issue 22, item 5): no GAIA tool reads, lists or writes through a
symbolic link that leaves the work dir, whether it points at a file or at a folder outside.

`run_python` can create such links (the sandbox sees only the work dir, but a link's target is a host path):
one test plants them that way; the others plant them directly, the same links without needing bubblewrap.
"""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Iterator

import pytest

from qitos.benchmark.gaia.tools import gaia_tools
from qitos.benchmark.gaia.web import WebConfig
from qitos.core.tools import Tool
from tests.conftest import require_system

from . import fixture_files as ff

PDF = b"%PDF-1.4 not really"


class _Files(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(PDF)))
        self.end_headers()
        self.wfile.write(PDF)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Files)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    ff.write_text(folder / "secret.txt", "the secret")
    return folder


def _tools(tmp_path: Path, **kwargs: object) -> dict[str, Tool]:
    web = WebConfig(allow_private_addresses=True)  # the file server is on loopback
    tools = gaia_tools(tmp_path / "work", [], web=web, **kwargs)  # type: ignore[arg-type]
    return {t.name: t for t in tools}


def _untouched(outside: Path) -> None:
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
    assert (outside / "secret.txt").read_text() == "the secret"


def test_a_download_is_never_saved_through_a_linked_folder(tmp_path: Path, outside: Path, server: str) -> None:
    tools = _tools(tmp_path)
    (tmp_path / "work" / "downloads").symlink_to(outside)
    with pytest.raises(PermissionError, match="'downloads' in the work dir is a link"):
        tools["visit_page"].invoke({"url": f"{server}/report.bin"})
    _untouched(outside)


def test_a_download_is_never_written_through_a_linked_file(tmp_path: Path, outside: Path, server: str) -> None:
    tools = _tools(tmp_path)
    downloads = tmp_path / "work" / "downloads"
    downloads.mkdir()
    (downloads / "secret.bin").symlink_to(outside / "secret.txt")  # an existing file outside
    (downloads / "planted.bin").symlink_to(outside / "planted.bin")  # a file outside that does not exist yet
    for name in ("secret", "planted"):
        out = tools["visit_page"].invoke({"url": f"{server}/{name}.bin"})
        assert f"saved as downloads/{name}_1.bin" in out, out
        assert (downloads / f"{name}_1.bin").read_bytes() == PDF and not (downloads / f"{name}_1.bin").is_symlink()
    _untouched(outside)


def test_no_tool_reads_lists_or_extracts_through_a_link(tmp_path: Path, outside: Path) -> None:
    tools = _tools(tmp_path)
    work = tmp_path / "work"
    (work / "file-link.txt").symlink_to(outside / "secret.txt")
    (work / "dir-link").symlink_to(outside)
    ff.write_text(work / "mine.txt", "mine")
    for path in ("file-link.txt", "dir-link/secret.txt"):
        with pytest.raises(PermissionError, match="outside the task's work dir"):
            tools["read_file"].invoke({"path": path})
    assert tools["list_files"].invoke({}) == "mine.txt (4 bytes)"  # the link to a file outside is not shown
    ff.write_zip(work / "bundle.zip", {"a.txt": "alpha"})
    (work / "bundle").symlink_to(outside)  # the default destination, named after the archive
    for destination in ("", "dir-link", "dir-link/sub"):
        with pytest.raises(PermissionError, match="outside the task's work dir"):
            tools["extract_zip"].invoke({"path": "bundle.zip", "destination": destination})
    _untouched(outside)


def test_links_planted_by_run_python_lead_nowhere(tmp_path: Path, outside: Path, server: str) -> None:
    from qitos.sandbox.bwrap import BwrapSandbox

    ok, reason = BwrapSandbox.available()
    require_system(ok, f"the bubblewrap sandbox: {reason}")
    tools = _tools(tmp_path, python_timeout_seconds=20)
    code = (f"import os\nos.symlink({str(outside)!r}, 'downloads')\n"
            f"os.symlink({str(outside / 'secret.txt')!r}, 'secret.txt')\nprint('planted')")
    assert "planted" in tools["run_python"].invoke({"code": code})
    assert (tmp_path / "work" / "downloads").is_symlink()
    with pytest.raises(PermissionError):
        tools["visit_page"].invoke({"url": f"{server}/report.bin"})
    with pytest.raises(PermissionError):
        tools["read_file"].invoke({"path": "secret.txt"})
    _untouched(outside)
