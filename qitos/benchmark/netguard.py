"""The network guard's old import path, kept for third-party benchmarks: it lives in `qitos.sandbox.netguard`."""

from qitos.sandbox.netguard import AddressRefused, check_url, guarded_client

__all__ = ["AddressRefused", "check_url", "guarded_client"]
