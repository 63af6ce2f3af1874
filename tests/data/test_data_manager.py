"""`qit data`: pinned sources, resumable download from a real loopback server, sha256 verification."""

import http.server
import io
import json
import tarfile
import threading
from pathlib import Path

import pytest

from qitos.benchmark.data import Source, download, fetch, get_source, sources, verify
from qitos.benchmark.errors import BenchmarkUsageError
from tests.conftest import require_data
from tests.platform.conftest import qit
from tests.support.openai_server import free_port, refused_port


class RangeHandler(http.server.BaseHTTPRequestHandler):
    """Serves one in-memory archive, honouring `Range: bytes=N-` like GitHub's CDN."""

    payload = b""
    requests: list = []

    def do_GET(self):  # noqa: N802 - http.server API
        RangeHandler.requests.append(self.headers.get("Range"))
        start = 0
        if self.headers.get("Range"):
            start = int(self.headers["Range"].split("=")[1].rstrip("-"))
            self.send_response(206)
        else:
            self.send_response(200)
        body = self.payload[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def archive_server():
    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), RangeHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}/archive.tar.gz"
    server.shutdown()


def osworld_archive(data: Path, tamper: bool = False) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for rel in get_source("osworld").files:
            content = (data / rel).read_bytes()
            if tamper and rel.endswith("test_small.json"):
                content += b" "
            info = tarfile.TarInfo(f"OSWorld-89426951/{rel.removeprefix('upstream/')}")  # upstream/: the repo's root
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_pinned_sources_verify_the_shared_data():
    root = require_data("osworld").parent
    for name in ("tau-bench", "cybench", "osworld"):
        report = verify(sources()[name], root)
        assert report.verified, (name, report.missing[:3], report.mismatched[:3])


def test_fetch_resumes_a_partial_download_and_verifies(tmp_path, archive_server):
    data = require_data("osworld")
    RangeHandler.payload = osworld_archive(data)
    RangeHandler.requests = []
    source = Source(**{**vars(get_source("osworld")), "archive": archive_server})
    cache = tmp_path / "data" / ".downloads"
    cache.mkdir(parents=True)
    half = len(RangeHandler.payload) // 2
    (cache / f"osworld-{source.commit[:12]}.tar.gz.part").write_bytes(RangeHandler.payload[:half])
    report = fetch("osworld", tmp_path / "data", source=source)
    assert report.verified and report.ok == len(source.files)
    installed = {p.relative_to(tmp_path / "data" / "osworld").as_posix()
                 for p in (tmp_path / "data" / "osworld").rglob("*") if p.is_file()}
    assert installed == set(source.files)  # every file fetch wrote is pinned
    assert RangeHandler.requests == [f"bytes={half}-"]
    assert json.loads((tmp_path / "data" / "osworld" / "evaluation_examples" / "test_all.json").read_text())


def test_fetch_refuses_a_changed_upstream(tmp_path, archive_server):
    RangeHandler.payload = osworld_archive(require_data("osworld"), tamper=True)
    source = Source(**{**vars(get_source("osworld")), "archive": archive_server})
    with pytest.raises(BenchmarkUsageError, match="do not match the pinned sha256"):
        fetch("osworld", tmp_path / "data", source=source)


def test_offline_download_is_a_clear_error(tmp_path):
    with pytest.raises(BenchmarkUsageError, match="Without internet"):
        download(f"http://127.0.0.1:{refused_port()}/x.tar.gz", tmp_path / "x.tar.gz")


def test_cli_list_verify_and_gated_gaia(tmp_path):
    root = require_data("osworld").parent
    listed = qit("data", "list", "--data-dir", root, cwd=tmp_path)
    assert listed.returncode == 0 and "verified" in listed.stdout and "gaia" in listed.stdout
    ok = qit("data", "verify", "--data-dir", root, cwd=tmp_path)
    assert ok.returncode == 0 and "tau-bench: verified" in ok.stdout
    gaia = qit("data", "fetch", "gaia", "--data-dir", tmp_path, cwd=tmp_path)
    assert gaia.returncode == 2 and "gated" in gaia.stderr
    empty = qit("data", "verify", "cybench", "--data-dir", tmp_path, cwd=tmp_path)
    assert empty.returncode == 1 and "qit data fetch cybench" in empty.stdout


def tau_archive(upstream: Path) -> bytes:
    """What GitHub serves for the pinned commit, restricted to the files `git archive` put in upstream/."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(p for p in upstream.rglob("*") if p.is_file()):
            info = tarfile.TarInfo(f"tau-bench-59a200c6d575d595120f1cb70fea53cef0632f6b/{path.relative_to(upstream).as_posix()}")
            content = path.read_bytes()
            info.size = len(content)
            tar.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def test_tau_bench_fetch_installs_data_and_upstream_protocol_files(tmp_path, archive_server):
    data = require_data("tau-bench")
    RangeHandler.payload = tau_archive(data / "upstream")
    source = Source(**{**vars(get_source("tau-bench")), "archive": archive_server})
    assert sum(1 for rel in source.files if rel.startswith("upstream/")) == 103
    report = fetch("tau-bench", tmp_path / "data", source=source)
    assert report.verified and report.ok == len(source.files) + len(source.converted)
    for rel in [*source.files, *source.converted]:  # converted data and upstream/ byte-identical to the shared copy
        assert (tmp_path / "data" / "tau-bench" / rel).read_bytes() == (data / rel).read_bytes(), rel
    installed = {p.relative_to(tmp_path / "data" / "tau-bench").as_posix()
                 for p in (tmp_path / "data" / "tau-bench").rglob("*") if p.is_file()}
    assert installed == {*source.files, *source.converted}  # every file fetch wrote is pinned, so verify checks it


def test_missing_upstream_files_name_the_fetch_command(tmp_path):
    from qitos.benchmark.tau_bench.upstream import UpstreamMissingError, load_upstream

    with pytest.raises(UpstreamMissingError, match="qit data fetch tau-bench"):
        load_upstream(tmp_path)


def test_verify_checks_every_installed_file_against_its_pin(tmp_path):
    """`qit data verify tau-bench` fails, naming the file, when a converted task file is cut short (issue 32)."""
    import shutil

    data = require_data("tau-bench")
    copy = tmp_path / "data" / "tau-bench"
    shutil.copytree(data, copy, copy_function=shutil.copyfile, ignore=shutil.ignore_patterns("conformance"))
    source = get_source("tau-bench")
    assert "retail/tasks_test.json" in source.converted  # pinned, not only required to exist
    ok = qit("data", "verify", "tau-bench", "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert ok.returncode == 0 and "tau-bench: verified" in ok.stdout, ok.stdout + ok.stderr
    tasks = copy / "retail" / "tasks_test.json"
    tasks.write_bytes(tasks.read_bytes()[:1000])
    cut = qit("data", "verify", "tau-bench", "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert cut.returncode == 1 and "Traceback" not in cut.stderr, cut.stderr
    [line] = cut.stdout.splitlines()
    assert "retail/tasks_test.json (changed)" in line and "`qit data fetch tau-bench`" in line, line
    tasks.unlink()
    gone = qit("data", "verify", "tau-bench", "--data-dir", tmp_path / "data", cwd=tmp_path)
    assert gone.returncode == 1 and "retail/tasks_test.json (missing)" in gone.stdout
