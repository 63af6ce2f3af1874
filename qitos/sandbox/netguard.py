"""An HTTP client for agent tools that refuses internal addresses (no SSRF through the agent).

A page the agent reads may tell it to fetch `http://127.0.0.1:8765/` (the qita board),
`http://169.254.169.254/` (cloud instance credentials) or a public name whose DNS answer is
`10.0.0.5`. The client from `guarded_client()` checks the address it is about to connect to, not
the URL: each connection resolves the host once, refuses when any answer is not a global unicast
address, and connects to exactly the address it checked (so a DNS answer that changes between the
check and the connection, "DNS rebinding", cannot slip through). Every redirect hop opens its
connection the same way, so a public page redirecting to an internal one is refused too. TLS still
verifies the certificate against the host name. Proxies from the environment are not used (a
proxy would make the connection, unchecked).

A host that is an IPv4 address in another spelling (`0177.0.0.1` octal, `0x7f.0.0.1` hex,
`2130706433` one integer, `127.1` short) is read the way inet_aton reads it, so it is the address
it means, checked and connected to without DNS. `check_url` refuses such a URL before any request
(httpx cannot even parse `0177.0.0.1`), and a URL that does not parse is refused, not raised.

`allow_private=True` (GAIA: `WebConfig.allow_private_addresses`, `QITOS_WEB_ALLOW_PRIVATE=1`)
turns the check off, for a search engine or a test server on the local network.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from typing import Any
from urllib.parse import urlsplit

import httpcore
import httpx

__all__ = ["AddressRefused", "guarded_client", "check_address", "check_url", "numeric_ipv4", "resolve"]


class AddressRefused(httpx.TransportError):
    """The host resolves to an address agent tools may not reach."""


def resolve(host: str, port: int) -> list[str]:
    """The host's addresses (IP literals resolve to themselves). Module-level so tests can stub DNS."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    seen: list[str] = []
    for info in infos:
        address = str(info[4][0])
        if address not in seen:
            seen.append(address)
    return seen


def check_address(address: str) -> str | None:
    """Why `address` may not be reached by an agent tool, or None when it may (global unicast only)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    embedded = []
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = [a for a in (ip.ipv4_mapped, ip.sixtofour, ip.teredo and ip.teredo[1]) if a]
    for candidate in [*embedded, ip]:  # the IPv4 inside says most about where it goes
        kind = _kind(candidate)
        if kind:
            return f"{address} is a {kind} address"
    return None


_IPV4_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


def numeric_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a numeric host means to inet_aton (and so to getaddrinfo): 1 to 4 parts, each decimal,
    octal (leading 0) or hex (0x), the last filling the remaining bytes; None when `host` is not one."""
    parts = host.split(".")
    if len(parts) > 1 and parts[-1] == "":  # "127.0.0.1." resolves like "127.0.0.1"
        parts.pop()
    if not 1 <= len(parts) <= 4 or not all(_IPV4_PART.fullmatch(p) for p in parts):
        return None
    values = [int(p[2:] or "0", 16) if p[:2].lower() == "0x" else int(p, 8) if p[:1] == "0" else int(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (4 - len(head)):
        return None
    return ipaddress.IPv4Address(sum(v << 8 * (3 - i) for i, v in enumerate(head)) + last)


def check_url(url: str) -> str | None:
    """Why agent tools may not fetch `url`, decided before any request: its host is an IP literal (in any
    spelling) that `check_address` refuses. None for names (checked after DNS); ValueError when the URL has
    no host or does not parse."""
    host = urlsplit(url).hostname  # ValueError for e.g. "http://[::1"
    if not host:
        raise ValueError("no host")
    literal = numeric_ipv4(host)
    if literal is not None:
        why = check_address(str(literal))
        return f"{host} is {literal}, and {why}" if why and host != str(literal) else why
    try:
        return check_address(host)
    except ValueError:  # a name
        return None


def _kind(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> str | None:
    if ip.is_loopback:
        return "loopback"
    if ip.is_link_local:
        return "link-local (cloud metadata lives here)"
    if ip.is_multicast:
        return "multicast"
    if ip.is_unspecified:
        return "unspecified"
    if ip.is_reserved:
        return "reserved"
    if ip.is_private:
        return "private"
    if not ip.is_global:
        return "non-global"
    return None


class _GuardedBackend(httpcore.SyncBackend):
    """Resolve, check every answer, then connect to the checked address."""

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Any = None) -> httpcore.NetworkStream:
        literal = numeric_ipv4(host)  # 0x7f.1 is an address, whatever a resolver would make of it
        try:
            addresses = [str(literal)] if literal is not None else resolve(host, port)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
        if not addresses:
            raise httpcore.ConnectError(f"cannot resolve {host}: no addresses")
        for address in addresses:
            why = check_address(address)
            if why:
                raise AddressRefused(f"refused to connect to {host}: {why}; agent tools may only reach public "
                                     "addresses")
        return super().connect_tcp(addresses[0], port, timeout=timeout, local_address=local_address,
                                   socket_options=socket_options)


class _GuardedClient(httpx.Client):
    """Refuses a URL that does not parse (httpx raises InvalidURL, not an HTTPError) or whose host is an
    internal IP literal in any spelling, naming the URL, before any connection."""

    def __init__(self, *, allow_private: bool, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._allow_private = allow_private

    def build_request(self, method: str, url: Any, **kwargs: Any) -> httpx.Request:
        try:
            why = None if self._allow_private else check_url(str(url))
            request = super().build_request(method, url, **kwargs)
        except (ValueError, httpx.InvalidURL) as exc:
            raise AddressRefused(f"refused to fetch {url}: not a valid URL ({exc})") from None
        if why:
            raise AddressRefused(f"refused to fetch {url}: {why}; agent tools may only reach public addresses")
        return request


def guarded_client(*, allow_private: bool = False, **kwargs: Any) -> httpx.Client:
    """An httpx.Client for agent-driven fetches; refuses internal addresses unless `allow_private`."""
    if allow_private:
        return _GuardedClient(allow_private=True, **kwargs)
    transport = httpx.HTTPTransport()
    pool = transport._pool
    if not hasattr(pool, "_network_backend"):  # httpcore changed: fail closed rather than fetch unchecked
        raise RuntimeError("this httpcore version does not expose the connection pool's network backend")
    pool._network_backend = _GuardedBackend()
    return _GuardedClient(allow_private=False, transport=transport, trust_env=False, **kwargs)
