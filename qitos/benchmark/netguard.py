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

`allow_private=True` (GAIA: `WebConfig.allow_private_addresses`, `QITOS_WEB_ALLOW_PRIVATE=1`)
turns the check off, for a search engine or a test server on the local network.
"""

from __future__ import annotations

import ipaddress
import socket
from typing import Any

import httpcore
import httpx

__all__ = ["AddressRefused", "guarded_client", "check_address", "resolve"]


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
        try:
            addresses = resolve(host, port)
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


def guarded_client(*, allow_private: bool = False, **kwargs: Any) -> httpx.Client:
    """An httpx.Client for agent-driven fetches; refuses internal addresses unless `allow_private`."""
    if allow_private:
        return httpx.Client(**kwargs)
    transport = httpx.HTTPTransport()
    pool = transport._pool
    if not hasattr(pool, "_network_backend"):  # httpcore changed: fail closed rather than fetch unchecked
        raise RuntimeError("this httpcore version does not expose the connection pool's network backend")
    pool._network_backend = _GuardedBackend()
    return httpx.Client(transport=transport, trust_env=False, **kwargs)
