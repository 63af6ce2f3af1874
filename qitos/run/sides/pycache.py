"""The agent host's bytecode: a read-only cache the scoring side builds, never `__pycache__` beside sources.

Python reads a `__pycache__/*.pyc` beside a source without looking at the source when the bytecode says
"unchecked hash", so a folder's bytecode can run other code than its hashed sources. The agent host's Python
therefore runs with PYTHONPYCACHEPREFIX set to a folder of its own and reads no bytecode beside any source. To
keep its start as fast as with bytecode (about 1 s instead of 4 s for the engine, pydantic and the OpenAI SDK),
the scoring side fills that folder, once per interpreter and installed set and then for each new list of warm
modules, by importing the host's warm modules (QitOS's and the environment's, never the agent's) in a child
process with the same prefix; the agent host gets it read-only. Bytecode there is written by import itself
(checked against each source's mtime and size), so a stale entry is recompiled in memory, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

BUILD_TIMEOUT_SECONDS = 120
_WARM = "import importlib, sys\nfor name in sys.argv[1:]:\n    try:\n        importlib.import_module(name)\n" \
        "    except Exception:\n        pass\n"


def cache_base() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qitos" / "agent-pycache"


def _key() -> str:
    """What the cache's contents depend on: the interpreter and the installed set. QitOS's sources are not in the
    key: an edited module's entry no longer matches its source's mtime and size, and is compiled in memory."""
    installed = [os.stat(p).st_mtime_ns for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
                 if os.path.isdir(p)]
    blob = json.dumps([sys.version, sys.executable, sorted(installed)])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def prefix(modules: list[str], pythonpath: list[str]) -> str:
    """The read-only bytecode folder for an agent host importing `modules` with `pythonpath`: one per interpreter
    and installed set, to which each new module list adds what it imports (written atomically by import itself,
    so a host reading it meanwhile sees whole files)."""
    target = cache_base() / _key()
    done = target / ".built" / hashlib.sha256(json.dumps([sorted(modules), pythonpath]).encode()).hexdigest()[:24]
    if done.exists():
        return str(target)
    done.parent.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(pythonpath),
           "PYTHONPYCACHEPREFIX": str(target), "QITOS_AGENT_SIDE": "1"}
    try:
        with tempfile.TemporaryDirectory() as empty:  # the child's current directory: nothing to import there
            subprocess.run([sys.executable, "-c", _WARM, *modules], env=env, cwd=empty, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=BUILD_TIMEOUT_SECONDS)
        done.touch()
    except (OSError, subprocess.SubprocessError):
        pass  # what was written is valid bytecode; what is missing is compiled from source in the host
    return str(target)
