"""The one way QitOS runs git: on a work tree the scoring side chose, with nothing from config that runs a program.

A repository's own config can name programs git runs: `core.fsmonitor` (run by `git status`), hooks,
clean/smudge filters (run by `git status` on files whose stat changed), `core.sshCommand`, external diff
and textconv commands, pagers, credential helpers. So every call here:

- reads no system or global config (GIT_CONFIG_NOSYSTEM, GIT_CONFIG_GLOBAL=/dev/null) and no GIT_* variable
  of the caller's environment (GIT_DIR, GIT_EXTERNAL_DIFF, GIT_CONFIG_PARAMETERS, GIT_SSH_COMMAND, ...);
- overrides the repository's config with `-c` for every single-valued key that runs a program
  (`OVERRIDES`), and skips submodules (their own configs);
- refuses to run at all (`GitRefused`) in a repository whose config (includes followed) defines a
  per-name program that `git status` runs and no `-c` can switch off for every name: filter drivers;
- never looks above the work tree it is given (GIT_CEILING_DIRECTORIES).

Callers pick the work tree themselves: QitOS's own checkout, or the repository of the `--runner`'s import
root as the scoring side's snapshot found it (`code_snapshot`), never a folder the agent names or can write.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

OVERRIDES = (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.untrackedCache=false", "core.sshCommand=false",
    "core.gitProxy=", "core.askPass=", "core.pager=cat", "core.editor=false", "sequence.editor=false",
    "core.alternateRefsCommand=false", "diff.external=", "credential.helper=", "gpg.program=false",
    "gpg.ssh.program=false", "gpg.x509.program=false", "protocol.allow=never", "submodule.recurse=false",
    "status.submoduleSummary=false", "diff.ignoreSubmodules=all", "core.worktree=",
)
# per-name drivers that run a program in `git status`, which `-c` cannot switch off for every name at once
# (diff and merge drivers, textconv and pagers run only in commands QitOS never runs: diff, merge, log -p)
DRIVER_KEY = re.compile(r"^filter\..*\.(clean|smudge|process)$", re.IGNORECASE | re.DOTALL)
TIMEOUT_SECONDS = 30


class GitRefused(RuntimeError):
    """The repository's config names a program git could run there: QitOS does not run git in it."""


def environment(top: Path) -> dict[str, str]:
    """The environment every git call gets: the caller's without GIT_* and config locations, then hardened."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") and k not in ("XDG_CONFIG_HOME",)}
    env.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_SYSTEM": "/dev/null",
                "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_OPTIONAL_LOCKS": "0",
                "GIT_PAGER": "cat", "PAGER": "cat", "GIT_NO_REPLACE_OBJECTS": "1", "LC_ALL": "C",
                "GIT_CEILING_DIRECTORIES": str(Path(top).resolve().parent), "HOME": "/nonexistent"})
    return env


def _argv(*args: str) -> list[str]:
    argv = ["git", "--no-optional-locks", "--literal-pathspecs", "--no-pager"]
    for item in OVERRIDES:
        argv += ["-c", item]
    return [*argv, *args]


def drivers(top: Path | str) -> list[str]:
    """The config keys of the repository at `top` (its own config and what it includes) that name a program
    per driver name; `git config --list` runs none of them."""
    done = subprocess.run(_argv("config", "--null", "--list", "--includes"), cwd=str(top), capture_output=True,
                          text=True, timeout=TIMEOUT_SECONDS, env=environment(Path(top)), stdin=subprocess.DEVNULL)
    if done.returncode != 0:  # no config at all is fine; anything else is git's own error, reported by the call
        return []
    keys = [entry.split("\n", 1)[0] for entry in done.stdout.split("\0") if entry]
    return sorted({k for k in keys if DRIVER_KEY.match(k)})


def run(top: Path | str, *args: str, timeout: float = TIMEOUT_SECONDS,
        reads_work_tree: bool = True) -> subprocess.CompletedProcess:
    """`git <args>` in the work tree `top` (text output), hardened as the module says; raises GitRefused.

    `reads_work_tree=False` for commands that read only objects and refs (rev-parse, ls-tree, cat-file), which
    run no filter: they skip the driver check."""
    named = drivers(top) if reads_work_tree else []
    if named:
        raise GitRefused(f"the repository at {top} names programs in its config ({', '.join(named[:3])}): "
                         "QitOS does not run git there; remove them from its .git/config")
    return subprocess.run(_argv(*args), cwd=str(top), capture_output=True, text=True, timeout=timeout,
                          env=environment(Path(top)), stdin=subprocess.DEVNULL)
