"""The sandbox limits' old import path, kept for third-party benchmarks: they live in `qitos.sandbox.limits`."""

from qitos.sandbox.limits import CgroupSupport, SandboxLimits, cgroup_support

__all__ = ["CgroupSupport", "SandboxLimits", "cgroup_support"]
