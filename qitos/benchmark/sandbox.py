"""The command sandbox's old import path, kept for third-party benchmarks: it lives in `qitos.sandbox.bwrap`."""

from qitos.sandbox.bwrap import (SANDBOX_PATH, WORK_MOUNT, BwrapSandbox, SandboxResult, SandboxSetupError,
                                 SandboxUnavailable, remove_tree)

__all__ = ["SANDBOX_PATH", "WORK_MOUNT", "BwrapSandbox", "SandboxResult", "SandboxSetupError", "SandboxUnavailable",
           "remove_tree"]
