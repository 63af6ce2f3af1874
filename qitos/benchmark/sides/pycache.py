"""The agent host's bytecode: a read-only cache the scoring side builds, never `__pycache__` beside sources.

Python reads a `__pycache__/*.pyc` beside a source without looking at the source when the bytecode says
"unchecked hash", so a folder's bytecode can run other code than its hashed sources. The agent host's Python
therefore runs with PYTHONPYCACHEPREFIX set to a folder of its own and reads no bytecode beside any source. To
keep its start as fast as with bytecode (about 1 s instead of 4 s for the engine, pydantic and the OpenAI SDK),
the scoring side fills that folder once per Python, module list and QitOS source state, by importing the
host's warm modules (QitOS's and the environment's, never the agent's) in a child process with the same
prefix; the agent host gets it read-only. Bytecode there is written by import itself (checked against each
source's mtime and size), so a stale entry is recompiled in memory, never trusted.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
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


def _key(modules: list[str], pythonpath: list[str]) -> str:
    """What the cache's contents depend on: the interpreter, the modules, QitOS's sources and the installed set."""
    import qitos

    package = Path(qitos.__file__).resolve().parent
    sources = sorted((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in package.rglob("*.py"))
    installed = [os.stat(p).st_mtime_ns for p in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
                 if os.path.isdir(p)]
    blob = json.dumps([sys.version, sys.executable, sorted(modules), pythonpath, sources, sorted(installed)])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def prefix(modules: list[str], pythonpath: list[str]) -> str:
    """The read-only bytecode folder for an agent host importing `modules` with `pythonpath` (built if missing)."""
    base = cache_base()
    target = base / _key(modules, pythonpath)
    if target.is_dir():
        return str(target)
    base.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="staging-", dir=base))
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": os.pathsep.join(pythonpath),
           "PYTHONPYCACHEPREFIX": str(staging), "QITOS_AGENT_SIDE": "1"}
    try:
        subprocess.run([sys.executable, "-c", _WARM, *modules], env=env, cwd=str(staging), stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=BUILD_TIMEOUT_SECONDS)
    except (OSError, subprocess.SubprocessError):
        pass  # what was written is valid bytecode; what is missing is compiled from source in the host
    try:
        staging.rename(target)
    except OSError:  # another process built it first
        shutil.rmtree(staging, ignore_errors=True)
    return str(target)
