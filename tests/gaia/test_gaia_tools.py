"""The GAIA toolset: work-dir confinement, file tools, web tools (offline), sandboxed Python."""

from __future__ import annotations

import http.server
import threading
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from qitos.benchmark.gaia.tools import GAIA_TOOL_NAMES, gaia_tools
from qitos.benchmark.gaia.web import SEARCH_UNAVAILABLE, WebConfig, WebError, html_to_text
from qitos.core.tools import Tool, ToolRegistry

from . import fixture_files as ff
from tests.conftest import require_system


def _tools(work: Path, attachments: list[Path] | None = None, **kwargs: object) -> dict[str, Tool]:
    return {t.name: t for t in gaia_tools(work, attachments or [], **kwargs)}  # type: ignore[arg-type]


def test_toolset_manifest(tmp_path: Path) -> None:
    registry = ToolRegistry(gaia_tools(tmp_path / "work", []))
    assert registry.names() == list(GAIA_TOOL_NAMES)
    read_only = {entry["name"]: entry["read_only"] for entry in registry.manifest()}
    assert read_only == {"read_file": True, "list_files": True, "extract_zip": False, "run_python": False,
                         "web_search": True, "visit_page": True}
    assert registry.get("read_file").input_schema["required"] == ["path"]  # type: ignore[union-attr]


def test_attachments_are_copied_and_readable(tmp_path: Path) -> None:
    source = ff.write_text(tmp_path / "notes.txt", "hello from the attachment")
    tools = _tools(tmp_path / "work", [source])
    assert (tmp_path / "work" / "notes.txt").read_text() == "hello from the attachment"
    assert tools["read_file"].invoke({"path": "notes.txt"}) == "hello from the attachment"
    assert tools["list_files"].invoke({}) == "notes.txt (25 bytes)"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        gaia_tools(tmp_path / "work2", [tmp_path / "missing.txt"])


@pytest.mark.parametrize("path", ["../outside.txt", "/etc/passwd", "sub/../../outside.txt"])
def test_paths_cannot_leave_the_work_dir(tmp_path: Path, path: str) -> None:
    ff.write_text(tmp_path / "outside.txt", "secret")
    tools = _tools(tmp_path / "work")
    with pytest.raises(PermissionError, match="outside the task's work dir"):
        tools["read_file"].invoke({"path": path})


def test_symlinks_out_of_the_work_dir_are_refused(tmp_path: Path) -> None:
    secret = ff.write_text(tmp_path / "secret.txt", "secret")
    tools = _tools(tmp_path / "work")
    (tmp_path / "work" / "link.txt").symlink_to(secret)
    (tmp_path / "work" / "linkdir").symlink_to(tmp_path)
    with pytest.raises(PermissionError):
        tools["read_file"].invoke({"path": "link.txt"})
    with pytest.raises(PermissionError):
        tools["list_files"].invoke({"path": "linkdir"})


def test_read_file_errors_and_unsupported(tmp_path: Path) -> None:
    tools = _tools(tmp_path / "work")
    (tmp_path / "work" / "sub").mkdir()
    (tmp_path / "work" / "clip.mp3").write_bytes(b"ID3\x00\x00")
    with pytest.raises(FileNotFoundError, match="list_files"):
        tools["read_file"].invoke({"path": "nope.txt"})
    with pytest.raises(IsADirectoryError):
        tools["read_file"].invoke({"path": "sub"})
    assert "cannot read '.mp3' files" in tools["read_file"].invoke({"path": "clip.mp3"})
    with pytest.raises(NotADirectoryError):
        tools["list_files"].invoke({"path": "clip.mp3"})
    assert tools["list_files"].invoke({"path": "sub"}) == "no files under 'sub'"


def test_read_file_pages_long_text(tmp_path: Path) -> None:
    ff.write_text(tmp_path / "long.txt", "ab" * 100)
    tools = _tools(tmp_path / "work", [tmp_path / "long.txt"], max_chars=150)
    first = tools["read_file"].invoke({"path": "long.txt"})
    assert "continue with offset=150" in first
    assert tools["read_file"].invoke({"path": "long.txt", "offset": 150}).startswith("ab" * 25)


def test_extract_zip_tool(tmp_path: Path) -> None:
    archive = ff.write_zip(tmp_path / "bundle.zip", {"a.txt": "alpha", "deep/b.txt": "beta"})
    tools = _tools(tmp_path / "work", [archive])
    out = tools["extract_zip"].invoke({"path": "bundle.zip"})
    assert out.startswith("extracted 2 file(s) into bundle/") and "bundle/deep/b.txt (4 bytes)" in out
    assert tools["read_file"].invoke({"path": "bundle/deep/b.txt"}) == "beta"
    assert "extracted 2 file(s) into x/" in tools["extract_zip"].invoke({"path": "bundle.zip", "destination": "x"})
    with pytest.raises(PermissionError):
        tools["extract_zip"].invoke({"path": "bundle.zip", "destination": "../escaped"})


# -- web ----------------------------------------------------------------------------------------


def test_web_tools_report_unavailable_without_configuration(tmp_path: Path) -> None:
    tools = _tools(tmp_path / "work")
    assert tools["web_search"].invoke({"query": "gaia"}) == SEARCH_UNAVAILABLE
    assert tools["web_search"].invoke({"query": "gaia"}).startswith("web search is unavailable: set QITOS_WEB_SEARCH")
    assert tools["visit_page"].invoke({"url": "http://127.0.0.1:9/"}).startswith("page visits are unavailable")
    keyless = _tools(tmp_path / "w2", web=WebConfig(search_provider="tavily"))
    assert "TAVILY_API_KEY" in keyless["web_search"].invoke({"query": "gaia"})


def test_web_config_from_env() -> None:
    assert WebConfig.from_env({}) is None
    assert WebConfig.from_env({"QITOS_WEB_SEARCH": "off"}) is None
    config = WebConfig.from_env({"QITOS_WEB_SEARCH": "Serper", "SERPER_API_KEY": "k1"})
    assert config is not None and config.search_provider == "serper" and config.search_problem() is None
    assert "k1" not in repr(config)  # the key is a secret
    generic = WebConfig.from_env({"QITOS_WEB_SEARCH": "brave", "QITOS_WEB_SEARCH_KEY": "k2"})
    assert generic is not None and generic.api_key is not None and generic.api_key.get_secret_value() == "k2"
    searx = WebConfig.from_env({"QITOS_WEB_SEARCH": "searxng"})
    assert searx is not None and "QITOS_SEARXNG_URL" in (searx.search_problem() or "")
    with pytest.raises(ValueError, match="not a known provider"):
        WebConfig.from_env({"QITOS_WEB_SEARCH": "altavista"})


SEARCH_PAYLOADS = {
    "tavily": {"results": [{"title": "T", "url": "https://t.example/1", "content": "tavily  snippet"}]},
    "serper": {"organic": [{"title": "T", "link": "https://t.example/1", "snippet": "tavily  snippet"}]},
    "brave": {"web": {"results": [{"title": "T", "url": "https://t.example/1", "description": "tavily  snippet"}]}},
    "searxng": {"results": [{"title": "T", "url": "https://t.example/1", "content": "tavily  snippet"}]},
}


@pytest.mark.parametrize("provider", sorted(SEARCH_PAYLOADS))
def test_search_providers_are_parsed(tmp_path: Path, provider: str) -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=SEARCH_PAYLOADS[provider])

    client = httpx.Client(transport=httpx.MockTransport(handler))  # no network: a mock transport
    config = WebConfig(search_provider=provider, api_key="secret-key", searxng_url="http://searx.invalid")
    tools = _tools(tmp_path / "work", web=config, http_client=client)
    assert tools["web_search"].invoke({"query": "lighthouse keepers"}) == "1. T\n   https://t.example/1\n   tavily snippet"
    request = seen[0]
    assert "lighthouse" in (request.content.decode() + str(request.url)).replace("+", " ").replace("%20", " ")
    if provider != "searxng":
        assert "secret-key" in " ".join(request.headers.values())


def test_search_http_error_is_raised(tmp_path: Path) -> None:
    client = httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(429)))
    tools = _tools(tmp_path / "work", web=WebConfig(search_provider="serper", api_key="k"), http_client=client)
    with pytest.raises(WebError, match="HTTP 429"):
        tools["web_search"].invoke({"query": "x"})


def test_html_to_text() -> None:
    html = ("<html><head><title>Lyra  facts</title><style>p{color:red}</style></head><body>"
            "<script>var x = 1;</script><h1>Moons</h1><p>Borealis has <b>12</b> moons.</p>"
            "<a href='/more'>more</a><a href='/icon'><img src='i.png'></a>"
            "<table><tr><td>Aster</td><td>3</td></tr></table></body></html>")
    text = html_to_text(html)
    assert text.startswith("# Lyra facts\n")
    assert "Borealis has 12 moons." in text and "[more](/more)" in text and "Aster\t3" not in text
    assert "Aster 3" in text and "var x" not in text and "color:red" not in text and "/icon" not in text


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server naming
        routes = {
            "/page": ("text/html; charset=utf-8", b"<title>Fixture</title><p>The keeper is Ada.</p>" + b"<p>z</p>" * 50),
            "/plain": ("text/plain", b"just text"),
            "/latin": ("text/html; charset=ISO-8859-1", "<p>caf\u00e9 cr\u00e8me</p>".encode("latin-1")),
            "/doc.pdf": ("application/pdf", Path(self.server.pdf_path).read_bytes()),  # type: ignore[attr-defined]
            "/blob": ("application/octet-stream", b"\x00\x01"),
        }
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/plain")
            self.end_headers()
            return
        if self.path not in routes:
            self.send_error(404)
            return
        content_type, body = routes[self.path]
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def loopback_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    pdf = ff.write_pdf(tmp_path_factory.mktemp("pdf") / "doc.pdf", [["Remote report: 42 lamps"]])
    server.pdf_path = str(pdf)  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_visit_page_against_loopback(tmp_path: Path, loopback_server: str) -> None:
    # loopback is refused by default (tests/security); this fixture server needs the explicit opt-in
    tools = _tools(tmp_path / "work", web=WebConfig(allow_private_addresses=True), max_chars=120)
    page = tools["visit_page"].invoke({"url": f"{loopback_server}/page"})
    assert page.startswith(f"URL: {loopback_server}/page\n\n# Fixture") and "The keeper is Ada." in page
    assert "continue with offset=" in page
    assert "z" in tools["visit_page"].invoke({"url": f"{loopback_server}/page", "offset": 100})
    assert tools["visit_page"].invoke({"url": f"{loopback_server}/moved"}).endswith("just text")
    assert tools["visit_page"].invoke({"url": f"{loopback_server}/latin"}).endswith("caf\u00e9 cr\u00e8me")
    pdf = tools["visit_page"].invoke({"url": f"{loopback_server}/doc.pdf"})
    assert "[saved as downloads/doc.pdf]" in pdf and "Remote report: 42 lamps" in pdf
    assert (tmp_path / "work" / "downloads" / "doc.pdf").is_file()
    assert "saved as downloads/blob.bin" in tools["visit_page"].invoke({"url": f"{loopback_server}/blob"})
    with pytest.raises(WebError, match="HTTP 404"):
        tools["visit_page"].invoke({"url": f"{loopback_server}/missing"})
    with pytest.raises(WebError, match="only http"):
        tools["visit_page"].invoke({"url": "file:///etc/passwd"})


# -- sandboxed python ---------------------------------------------------------------------------


@pytest.fixture
def sandboxed(tmp_path: Path) -> dict[str, Tool]:
    from qitos.sandbox.bwrap import BwrapSandbox

    ok, reason = BwrapSandbox.available()
    require_system(ok, f"the bubblewrap sandbox: {reason}")
    return _tools(tmp_path / "work", python_timeout_seconds=5)


def test_run_python_in_the_work_dir(sandboxed: dict[str, Tool], tmp_path: Path) -> None:
    ff.write_text(tmp_path / "work" / "data.csv", "a,b\n1,2\n")
    out = sandboxed["run_python"].invoke({"code": (
        "import csv, os\nprint(os.getcwd())\nprint(list(csv.reader(open('data.csv'))))\n"
        "open('result.txt', 'w').write('written inside')")})
    assert out.startswith("exit code: 0\n--- stdout ---\n/task\n[['a', 'b'], ['1', '2']]")
    assert (tmp_path / "work" / "result.txt").read_text() == "written inside"
    failing = sandboxed["run_python"].invoke({"code": "raise SystemExit('boom')"})
    assert failing.startswith("exit code: 1") and "boom" in failing
    assert "(no output" in sandboxed["run_python"].invoke({"code": "x = 1"})


def test_run_python_cannot_write_outside_the_work_dir(sandboxed: dict[str, Tool], tmp_path: Path) -> None:
    target = tmp_path / "escaped.txt"
    out = sandboxed["run_python"].invoke({"code": f"open({str(target)!r}, 'w').write('x')"})
    assert "exit code: 1" in out and ("Read-only file system" in out or "No such file" in out)
    assert not target.exists()
    home = sandboxed["run_python"].invoke({"code": "open('/usr/evil', 'w')"})
    assert "exit code: 1" in home


def test_run_python_cannot_reach_the_network(sandboxed: dict[str, Tool], loopback_server: str) -> None:
    assert httpx.get(f"{loopback_server}/plain").text == "just text"  # reachable from the host
    code = (
        "import urllib.request\n"
        "try:\n"
        f"    urllib.request.urlopen({loopback_server + '/plain'!r}, timeout=3)\n"
        "    print('REACHED')\n"
        "except Exception as exc:\n"
        "    print('BLOCKED', type(exc).__name__)\n"
    )
    out = sandboxed["run_python"].invoke({"code": code})
    assert "BLOCKED" in out and "REACHED" not in out


def test_run_python_times_out(tmp_path: Path) -> None:
    from qitos.sandbox.bwrap import BwrapSandbox

    ok, reason = BwrapSandbox.available()
    require_system(ok, f"the bubblewrap sandbox: {reason}")
    tools = _tools(tmp_path / "work", python_timeout_seconds=1)
    out = tools["run_python"].invoke({"code": "while True: pass"})
    assert out.startswith("exit code: none (killed)") and "timed out" in out
