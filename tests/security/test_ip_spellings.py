"""IPv4 addresses in other spellings (issue 22, item 6): `0177.0.0.1` (octal), `0x7f.0.0.1` (hex),
`2130706433` (one integer) are the loopback address they mean, refused like it without asking DNS, and
a URL httpx cannot parse is a clean refusal naming it, never an uncaught `httpx.InvalidURL`.

DNS is stubbed to answer every name with a public address, so a refusal here comes from reading the
literal, not from what a resolver happens to make of it.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from qitos.sandbox import netguard
from qitos.benchmark.gaia.web import WebConfig, WebRefused, fetch_page, visit_client
from tests.security.test_fetch_refusals import _Recorder, _visit_through_engine, recorder  # noqa: F401

SPELLINGS = {"0177.0.0.1": "127.0.0.1", "0x7f.0.0.1": "127.0.0.1", "2130706433": "127.0.0.1",
             "0x7f000001": "127.0.0.1", "127.1": "127.0.0.1", "0": "0.0.0.0", "0300.0250.1.1": "192.168.1.1",
             "0251.0376.0251.0376": "169.254.169.254", "012.0.0.5": "10.0.0.5"}


@pytest.fixture(autouse=True)
def public_dns(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    asked: list[str] = []

    def fake(host: str, port: int) -> list[str]:
        asked.append(host)
        return ["93.184.215.14"]

    monkeypatch.setattr(netguard, "resolve", fake)
    return asked


def test_numeric_hosts_read_as_inet_aton_reads_them() -> None:
    for host, address in SPELLINGS.items():
        assert netguard.numeric_ipv4(host) == ipaddress.IPv4Address(address), host
    assert netguard.numeric_ipv4("134744072") == ipaddress.IPv4Address("8.8.8.8")
    for name in ("example.com", "08.0.0.1", "1.2.3.4.5", "256.0.0.1", "4294967296", "1e3", ""):
        assert netguard.numeric_ipv4(name) is None, name


@pytest.mark.parametrize("host", sorted(SPELLINGS))
def test_every_spelling_of_an_internal_address_is_refused(tmp_path: Path, host: str, public_dns: list[str]) -> None:
    url = f"http://{host}:8765/"
    (out,) = _visit_through_engine(tmp_path, [url])
    assert out.startswith(f"refused: {url}: {host} is {SPELLINGS[host]}") and "agent tools may only reach public" \
        in out, out
    with visit_client(WebConfig()) as client, pytest.raises(netguard.AddressRefused, match="refused to fetch"):
        client.get(url)  # the client alone refuses it too
    assert public_dns == []


def test_a_url_httpx_cannot_parse_is_refused_by_name(tmp_path: Path) -> None:
    for config in (WebConfig(), WebConfig(allow_private_addresses=True)):
        for url in ("http://0177.0.0.1/", "http://[::1/", "http://010.0.0.1/"):
            with visit_client(config) as client, pytest.raises(WebRefused, match="not a valid URL|is 127") as caught:
                fetch_page(config, url, client)
            assert str(caught.value).startswith(url), caught.value
    with visit_client(WebConfig(allow_private_addresses=True)) as client, \
            pytest.raises(netguard.AddressRefused, match=r"refused to fetch http://0177\.0\.0\.1/: not a valid URL"):
        client.get("http://0177.0.0.1/")


def test_a_public_spelling_connects_to_the_address_it_means(tmp_path: Path, recorder: str,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch,
                                                            public_dns: list[str]) -> None:
    real = netguard.check_address
    monkeypatch.setattr(netguard, "check_address", lambda a: None if a == "127.0.0.2" else real(a))
    port = recorder.split(":")[1]
    (out,) = _visit_through_engine(tmp_path, [f"http://0x7f.0.0.2:{port}/page"])  # 127.0.0.2 plays a public host
    assert "public page" in out and _Recorder.hits == ["/page"] and public_dns == []
