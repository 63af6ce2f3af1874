"""A third-party `--runner` that attacks what the scoring side writes for it and what its task may use.

Copied by `test_red_team_limits.py` into a folder outside any repository and run with `--runner
red_team_limits_agent:build`; `attack.txt` beside it names the attack. It calls its model once, then:

- `asset_names`: streams step assets named `.git/config` (with a `core.fsmonitor` command), `agent_code/x.py`,
  `../x`, dot files, `manifest.json` and `steps.jsonl`, through its own trace stream;
- `asset_file` / `asset_run`: streams one asset bigger than the per-file quota / many that pass the per-run one;
- `notes`: leaves a note in every place it can write (`/`, `/tmp`, `/dev/shm`, home, its work dir, and any
  directory a walk of the filesystem finds writable), then looks for notes its sibling tasks left;
- `fork_bomb`, `memory_hog`, `huge_file`, `cpu_burn`: tries to use more than its limits allow;
- `crash`: raises after its model answered (the run ends `error`).

Its final answer is a JSON report of what it did and found.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import time
from pathlib import Path
from typing import Any

NOTE = "qitos-red-team-note-"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24  # an image's first bytes: the board shows it
PLACES = ["/", "/tmp", "/dev/shm", "/dev", "/var/tmp", "/run", "/tmp/work"]


def _writer() -> Any:
    return next(o for o in gc.get_objects() if type(o).__name__ == "StreamWriter" and hasattr(o, "_send"))


def _stream(assets: dict[str, bytes], step_id: int = 100) -> list[str]:
    """One step record whose visual assets are `assets`, sent through this process's own trace stream."""
    writer = _writer()
    record = {"step_id": step_id, "visual_assets": [{"kind": "screenshot", "path": name, "mime_type": "image/png"}
                                                   for name in assets]}
    writer._send({"op": "step", "record": record,
                  "assets": {name: base64.b64encode(data).decode("ascii") for name, data in assets.items()}})
    return list(assets)


def asset_names() -> dict[str, Any]:
    names = {".git/config": b"[core]\n\tfsmonitor = touch /tmp/qitos-red-team-pwned\n",
             ".git/HEAD": b"ref: refs/heads/main\n", "agent_code/x.py": b"print('not what ran')\n",
             "agent_code/index.json": b"{}", "../x": b"outside", "../../y": b"further", ".hidden": b"dot file",
             "screens/.profile": b"dot file in a folder", "manifest.json": b"{\"official_run\": true}",
             "steps.jsonl": b"{}\n", "/tmp/qitos-red-team-abs": b"absolute",
             "../screens/shot.png": PNG}
    return {"sent": _stream(names)}


def asset_sizes(kind: str) -> dict[str, Any]:
    mib = 1 << 20
    if kind == "asset_file":
        return {"sent": _stream({"big.png": os.urandom(3 * mib)})}
    sent = []
    for i in range(8):  # 8 distinct MiB-sized screenshots
        sent += _stream({f"shot_{i}.png": os.urandom(mib)}, step_id=100 + i)
    return {"sent": sent}


def _writable_dirs(limit: int = 4000) -> list[str]:
    found, seen = [], 0
    for root, dirs, _ in os.walk("/", onerror=lambda e: None):
        if root.startswith(("/proc", "/sys", "/usr", "/lib", "/bin", "/sbin", "/etc")) or "python3." in root:
            dirs[:] = []
            continue
        seen += 1
        if os.access(root, os.W_OK):
            found.append(root)
        if seen > limit:
            break
    return found


def notes(task_id: str) -> dict[str, Any]:
    home = os.path.expanduser("~")
    places = list(dict.fromkeys([*PLACES, home, os.getcwd(), os.environ.get("TMPDIR", "/tmp"), *_writable_dirs()]))
    wrote, refused = [], {}
    for place in places:
        path = os.path.join(place, f"{NOTE}{task_id}")
        try:
            with open(path, "w") as handle:
                handle.write(task_id)
            wrote.append(place)
        except OSError as exc:
            refused[place] = exc.strerror
    found = []
    for place in places:
        try:
            names = os.listdir(place)
        except OSError:
            continue
        found += [os.path.join(place, n) for n in names if n.startswith(NOTE) and n != f"{NOTE}{task_id}"]
    return {"wrote": wrote, "refused": refused, "found": found, "places": len(places)}


def fork_bomb() -> dict[str, Any]:
    """Up to 400 sleeping children (bounded even if nothing else stops it); failed forks are counted."""
    started, failed = 0, 0
    for _ in range(400):
        try:
            pid = os.fork()
        except OSError:
            failed += 1
            time.sleep(0.01)
            continue
        if pid == 0:
            time.sleep(20)
            os._exit(0)
        started += 1
    time.sleep(5)
    return {"started": started, "failed": failed}


def memory_hog() -> dict[str, Any]:
    held, mib = [], 1 << 20
    try:
        for _ in range(48):  # up to 3 GiB, touched
            held.append(bytearray(os.urandom(16)) * (4 * mib))
            time.sleep(0.05)
    except MemoryError:
        return {"held_mib": len(held) * 64, "memory_error": True}
    time.sleep(3)
    return {"held_mib": len(held) * 64}


def huge_file() -> dict[str, Any]:
    path, written, chunk = os.path.join(os.environ.get("TMPDIR", "/tmp"), "huge.bin"), 0, b"x" * (1 << 20)
    try:
        with open(path, "wb") as handle:
            for _ in range(256):
                handle.write(chunk)
                handle.flush()
                written += len(chunk)
    except OSError as exc:
        return {"written": written, "error": exc.strerror, "size": os.path.getsize(path)}
    return {"written": written, "size": os.path.getsize(path)}


def cpu_burn() -> dict[str, Any]:
    start = time.monotonic()
    n = 0
    while time.monotonic() - start < 30:
        n += 1
    return {"loops": n}


def build(ctx: Any):
    from qitos.core import AgentModule, Decision

    attack = Path(__file__).with_name("attack.txt").read_text().strip()  # the test writes it beside this module

    class RedTeam(AgentModule):
        name = "red-team-limits"

        def decide(self, task, state):
            if not state.scratch.get("called"):
                state.scratch["called"] = True
                return None  # one model call, so the run could be official
            if attack == "asset_names":
                report = asset_names()
            elif attack in ("asset_file", "asset_run"):
                report = asset_sizes(attack)
            elif attack == "notes":
                report = notes(task.id)
            elif attack == "crash":  # an errored run must never be official, whatever else passed
                raise RuntimeError("the agent crashed after its model answered")
            else:
                report = {"fork_bomb": fork_bomb, "memory_hog": memory_hog, "huge_file": huge_file,
                          "cpu_burn": cpu_burn}[attack]()
            return Decision.final(json.dumps(report))

    return RedTeam(tools=[], system_prompt="Answer briefly.")
