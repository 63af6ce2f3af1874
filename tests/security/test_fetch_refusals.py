"""SSRF through the agent: GAIA's visit_page asked (by a scripted model) to fetch internal addresses.

The board and the redirecting server are real HTTP servers on loopback; DNS is stubbed by replacing
`qitos.sandbox.netguard.resolve` (the one resolver the fetcher uses), never by editing /etc/hosts.
"""

from __future__ import annotations

import http.server
import json
import threading
from pathlib import Path
from typing import Iterator

import pytest

from qitos.sandbox import netguard
from qitos.benchmark.gaia.tools import gaia_tools
from qitos.benchmark.gaia.web import WebConfig
from qitos.core import AgentModule, Engine, Task
from qitos.models.scripted import ScriptedModel
from qitos.qita.config import BoardConfig
from qitos.qita.server import BoardServer


@pytest.fixture
def board(tmp_path: Path) -> Iterator[BoardServer]:
    (tmp_path / "logdir").mkdir()
    server = BoardServer(BoardConfig(logdir=tmp_path / "logdir", port=0, cache_dir=tmp_path / "cache")).start()
    yield server
    server.stop()


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802
        type(self).hits.append(self.path)
        if self.path.startswith("/go"):
            self.send_response(302)
            self.send_header("Location", self.path.split("to=", 1)[1])
            self.end_headers()
            return
        body = b"<html><title>ok</title><p>public page</p></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def recorder() -> Iterator[str]:
    """A server on 127.0.0.2 (loopback range); tests treat that one address as "public"."""
    _Recorder.hits = []
    server = http.server.ThreadingHTTPServer(("127.0.0.2", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.2:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _visit_through_engine(tmp_path: Path, urls: list[str], web: WebConfig | None = None) -> list[str]:
    """A scripted model calls visit_page on each URL; returns the tool outputs recorded in the trace."""
    tools = gaia_tools(tmp_path / "work", [], web=web or WebConfig())
    replies = [f"Action: visit_page\nAction Input: {json.dumps({'url': u})}" for u in urls] + ["Final Answer: done"]
    result = Engine(AgentModule(tools=tools), ScriptedModel(replies), trace_logdir=tmp_path / "runs",
                    tool_error_limit=100).run(Task(id="ssrf", objective="fetch"))
    outputs = []
    for line in (Path(result.run_dir) / "events.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event["kind"] == "tool_result":
            outputs.append(event["payload"]["output"])
    assert result.stop_reason.value == "final"
    return outputs


def test_loopback_board_and_metadata_addresses_are_refused(tmp_path: Path, board: BoardServer) -> None:
    assert "qita" in __import__("httpx").get(board.url("/")).text.lower()  # the board is up and reachable
    urls = [board.url("/"), board.url("/").replace("127.0.0.1", "localhost"),
            "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
            "http://[::1]:1/", "http://[::ffff:127.0.0.1]:1/", "http://0.0.0.0:1/", "http://10.0.0.5/",
            "http://224.0.0.1/", "http://100.100.100.200/latest/meta-data/"]
    outputs = _visit_through_engine(tmp_path, urls)
    assert len(outputs) == len(urls)
    for url, out in zip(urls, outputs):
        assert out.startswith("refused:") and "agent tools may only reach public addresses" in out, (url, out)
    assert "loopback" in outputs[0] and "link-local" in outputs[2] and "private" in outputs[6]


def test_a_public_name_resolving_to_loopback_is_refused(tmp_path: Path, board: BoardServer,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []

    def fake_dns(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"] if host == "innocent.example.com" else ["203.0.113.9"]

    monkeypatch.setattr(netguard, "resolve", fake_dns)
    port = board.config.port
    outputs = _visit_through_engine(tmp_path, [f"http://innocent.example.com:{port}/"])
    assert outputs[0].startswith("refused:") and "127.0.0.1 is a loopback address" in outputs[0]
    assert asked == ["innocent.example.com"]


def test_every_redirect_hop_is_checked(tmp_path: Path, recorder: str, board: BoardServer,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[str] = []
    real_check = netguard.check_address

    def policy(address: str) -> str | None:
        checked.append(address)
        return None if address == "127.0.0.2" else real_check(address)  # 127.0.0.2 plays a public host

    monkeypatch.setattr(netguard, "check_address", policy)
    monkeypatch.setattr(netguard, "resolve", lambda host, port: ["127.0.0.2"] if host == "public.example" else
                        [host])
    port = recorder.split(":")[1]
    ok_page, redirected = _visit_through_engine(tmp_path, [
        f"http://public.example:{port}/page",
        f"http://public.example:{port}/go?to={board.url('/runs')}",
    ])
    assert "public page" in ok_page  # the check lets public hosts through
    assert redirected.startswith("refused:") and "127.0.0.1 is a loopback address" in redirected
    assert _Recorder.hits == ["/page", f"/go?to={board.url('/runs')}"] and checked[-1] == "127.0.0.1"


def test_explicit_option_allows_private_addresses(tmp_path: Path, board: BoardServer,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QITOS_WEB_SEARCH", "searxng")
    monkeypatch.setenv("QITOS_WEB_ALLOW_PRIVATE", "1")
    config = WebConfig.from_env()
    assert config is not None and config.allow_private_addresses
    (out,) = _visit_through_engine(tmp_path, [board.url("/")], web=config)
    assert out.startswith(f"URL: {board.url('/')}")


def test_public_addresses_pass_the_check() -> None:
    for address in ("93.184.215.14", "8.8.8.8", "2606:4700:4700::1111"):
        assert netguard.check_address(address) is None
    for address, kind in (("127.0.0.1", "loopback"), ("169.254.169.254", "link-local"), ("fd00:ec2::254", "private"),
                          ("192.168.1.1", "private"), ("::ffff:10.0.0.1", "private"), ("240.0.0.1", "reserved"),
                          ("ff02::1", "multicast"), ("2002:7f00:1::", "loopback")):
        assert kind in (netguard.check_address(address) or ""), address
