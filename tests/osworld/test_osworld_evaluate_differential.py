"""QitOS's OSWorld scoring beside upstream's own `DesktopEnv.evaluate`, on the same test VM and the same last actions.

The cases are the ones where the two used to differ:
- FAIL: upstream ends and scores on the *string* `FAIL` only; a computer_13 `{"action_type": "FAIL"}` is no FAIL
  (on an infeasible task it scores 0, on a feasible one the metric runs);
- gold files: upstream fetches a `cloud_file` when its metric is reached, so a dead link behind an `and` that
  already failed, or an `or` that already passed, does not matter; a reached one is fetched;
- lazy imports inside upstream metrics: `compare_archive` imports its per-file comparer (`from .vscode import
  compare_text_file`, `.table`, `.docs`) when it runs, which must resolve to the loaded copy of the evaluators.

Upstream runs in its own process (`upstream_desktop_env.py`), with upstream's `PythonController` over HTTP to the
same loopback VM QitOS's provider talks to; gold files come from a loopback HTTP server.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import zipfile
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from osworld_vm_controller import VMController

from qitos.benchmark.osworld import OSWorldTask, evaluate
from qitos.benchmark.osworld.controller import ControllerClient
from qitos.benchmark.osworld.downloads import HttpDownloader
from qitos.benchmark.osworld.provider import ControllerProvider
from tests.support.openai_server import refused_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FAIL_DICT = {"action_type": "FAIL", "parameters": {}}
CLICK = {"action_type": "CLICK", "parameters": {"x": 1, "y": 2}}


def echo(text: str) -> dict[str, Any]:
    return {"type": "vm_command_line", "command": ["echo", "-n", text]}


def rule(value: str) -> dict[str, Any]:
    return {"type": "rule", "rules": {"expected": value}}


def vm_file(name: str) -> dict[str, Any]:
    return {"type": "vm_file", "path": f"/home/user/{name}", "dest": name}


def cloud(url: str, dest: str) -> dict[str, Any]:
    return {"type": "cloud_file", "path": url, "dest": dest}


def archive(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def docx_bytes(*paragraphs: str) -> bytes:
    import docx

    document = docx.Document()
    for text in paragraphs:
        document.add_paragraph(text)
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


def cases(gold_url: str, dead_url: str) -> list[tuple[str, dict[str, Any], list[Any]]]:
    """(id, evaluator, action history)."""
    match = {"func": "exact_match", "result": echo("a"), "expected": rule("a")}
    miss = {"func": "exact_match", "result": echo("a"), "expected": rule("b")}
    out: list[tuple[str, dict[str, Any], list[Any]]] = []
    for name, actions in [("fail", ["FAIL"]), ("fail-dict", [FAIL_DICT]), ("done", ["DONE"]),
                          ("click-fail-dict", [CLICK, FAIL_DICT]), ("none", [])]:
        out.append((f"infeasible-{name}", {"func": "infeasible"}, actions))
        out.append((f"feasible-{name}", match, actions))
    out.append(("feasible-miss-fail-dict", miss, [FAIL_DICT]))

    def pair(first: dict[str, Any], conj: str, second_expected: dict[str, Any]) -> dict[str, Any]:
        return {"func": [first["func"], "compare_text_file"], "conj": conj,
                "result": [first["result"], vm_file("answer.txt")],
                "expected": [first["expected"], second_expected]}

    out.append(("gold-dead-behind-failed-and", pair(miss, "and", cloud(dead_url, "dead1.txt")), ["DONE"]))
    out.append(("gold-dead-behind-passed-or", pair(match, "or", cloud(dead_url, "dead2.txt")), ["DONE"]))
    out.append(("gold-reached-and", pair(match, "and", cloud(gold_url, "gold.txt")), ["DONE"]))
    out.append(("gold-reached-or", pair(miss, "or", cloud(gold_url, "gold.txt")), ["DONE"]))
    for file_type, pred, gold in [("text", "pred_text.zip", "gold_text.zip"), ("text", "pred_text_bad.zip", "gold_text.zip"),
                                  ("csv", "pred_csv.zip", "gold_csv.zip"), ("csv", "pred_csv_bad.zip", "gold_csv.zip"),
                                  ("docx", "pred_docx.zip", "gold_docx.zip"), ("docx", "pred_docx_bad.zip", "gold_docx.zip")]:
        out.append((f"archive-{pred[:-4]}", {"func": "compare_archive", "result": vm_file(pred), "expected": vm_file(gold),
                                             "options": {"file_type": file_type}}, ["DONE"]))
    return out


def place_files(vm: VMController) -> None:
    vm.place("/home/user/answer.txt", b"forty-two\n")
    vm.place("/home/user/gold_text.zip", archive({"a.txt": b"one\n", "b.txt": b"two\n"}))
    vm.place("/home/user/pred_text.zip", archive({"a.txt": b"one\n", "b.txt": b"two\n"}))
    vm.place("/home/user/pred_text_bad.zip", archive({"a.txt": b"one\n", "b.txt": b"three\n"}))
    vm.place("/home/user/gold_csv.zip", archive({"t.csv": b"a,b\n1,2\n"}))
    vm.place("/home/user/pred_csv.zip", archive({"t.csv": b"a,b\n1,2\n"}))
    vm.place("/home/user/pred_csv_bad.zip", archive({"t.csv": b"a,b\n1,3\n"}))
    vm.place("/home/user/gold_docx.zip", archive({"d.docx": docx_bytes("Hello", "World")}))
    vm.place("/home/user/pred_docx.zip", archive({"d.docx": docx_bytes("Hello", "World")}))
    vm.place("/home/user/pred_docx_bad.zip", archive({"d.docx": docx_bytes("Hello", "Moon")}))


@pytest.fixture
def gold_server(tmp_path: Path):
    root = tmp_path / "gold"
    root.mkdir()
    (root / "gold.txt").write_bytes(b"forty-two\n")
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


def upstream_scores(osworld_data: Path, port: int, cache: Path, batch: list[tuple[str, dict, list]]) -> dict[str, Any]:
    payload = [{"id": cid, "evaluator": ev, "actions": actions, "port": port, "cache_dir": str(cache)}
               for cid, ev, actions in batch]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    out = cache / "scores.json"
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, str(HERE / "upstream_desktop_env.py"), str(osworld_data), str(out)],
                          input=json.dumps(payload), capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return {cid: result for (cid, _, _), result in zip(batch, json.loads(out.read_text()))}


def test_scores_equal_upstream_evaluate(tmp_path: Path, osworld_data: Path, upstream, gold_server: str) -> None:
    dead = f"http://127.0.0.1:{refused_port()}/gone.txt"  # nothing listens: fetching it fails
    batch = cases(f"{gold_server}/gold.txt", dead)
    with VMController(tmp_path / "vm") as vm:
        place_files(vm)
        port = int(vm.url.rsplit(":", 1)[1])
        theirs = upstream_scores(osworld_data, port, tmp_path / "upstream-cache", batch)
        provider = ControllerProvider(ControllerClient(vm.url, timeout=30), sleep=lambda s: None)
        try:
            ours = {}
            for cid, evaluator, actions in batch:
                task = OSWorldTask.model_validate({"id": cid, "domain": "os", "snapshot": "os", "instruction": "x",
                                                   "evaluator": evaluator})
                outcome = evaluate(task, upstream, provider, actions, downloader=HttpDownloader(timeout=10),
                                   cache_dir=tmp_path / "qitos-cache" / cid)
                ours[cid] = {"score": outcome.score} if outcome.status == "scored" else \
                    {"error": f"{outcome.status}: {outcome.reason}"}
        finally:
            provider.close()
    print(f"\n{len(batch)} cases: " + ", ".join(f"{cid}={r.get('score', 'error')}" for cid, r in ours.items()))
    assert ours == theirs
    # the cases do exercise what they are named for
    assert theirs["infeasible-fail"] == {"score": 1.0} and theirs["infeasible-fail-dict"] == {"score": 0.0}
    assert theirs["feasible-fail"] == {"score": 0.0} and theirs["feasible-fail-dict"] == {"score": 1.0}
    assert theirs["gold-dead-behind-failed-and"] == {"score": 0.0}
    assert theirs["gold-dead-behind-passed-or"] == {"score": 1.0}
    assert theirs["gold-reached-and"] == {"score": 1.0} and theirs["gold-reached-or"] == {"score": 1.0}
    assert [theirs[f"archive-pred_{t}"]["score"] for t in ("text", "csv", "docx")] == [1.0, 1.0, 1.0]
    assert [theirs[f"archive-pred_{t}_bad"]["score"] for t in ("text", "csv", "docx")] == [0.5, 0.0, 0.0]
