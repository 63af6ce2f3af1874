"""Scoring side (its confined scorer process): inside the scorer sandbox: run one upstream metric on what the scoring
side sent; answer one JSON line.

`scorer.py` starts this file (`python <path>/scorer_main.py`) in a bubblewrap sandbox of its own, with
the job on stdin (base64 of a pickle: the checkout, the metric's name, its positional arguments and options, file
paths already pointing into the sandbox's `/task`). The answer, on the stdout this process had at start, is
`{"score": <float>}`, `{"kind": "optional_package", "package": ...}` or `{"kind": "exception", "error": ...}`;
anything upstream's metric (or what it runs) prints goes to stderr instead. The scoring side trusts none of it
beyond a number in [0, 1] or a named failure.

Only the metric's own module of upstream's `metrics` is loaded (`upstream.load_metric`: the getters ran on the
scoring side, and the other modules cost seconds of imports), by the same loader as there (optional packages as
placeholders); QitOS's OSWorld package itself is not imported (its adapter, controller and models are not needed
here, and take half a second).
"""

from __future__ import annotations

import os
import sys

if sys.path and os.path.realpath(sys.path[0]) == os.path.dirname(os.path.realpath(__file__)):
    del sys.path[0]  # run as a file: this folder's modules are not top-level names

import base64
import json
import pickle
import types
from pathlib import Path

MAX_ERROR_CHARS = 2000


def _loader() -> types.ModuleType:
    """`qitos.benchmark.osworld.upstream` without running the package's `__init__` (adapter, controller, models)."""
    here = Path(__file__).resolve().parent
    package = types.ModuleType("qitos.benchmark.osworld")
    package.__path__ = [str(here)]
    sys.modules.setdefault("qitos.benchmark.osworld", package)
    from qitos.benchmark.osworld import upstream

    return upstream


def _answer(job: dict) -> dict:
    upstream = _loader()
    try:
        metric = upstream.load_metric(job["checkout"], job["module"], job["attr"])
        if metric is None:
            return {"kind": "exception", "error": f"the OSWorld evaluators have no metric {job['func']!r}"}
        return {"score": float(metric(*job["args"], **job["options"]))}
    except upstream.OptionalPackageMissing as exc:
        return {"kind": "optional_package", "package": exc.package}
    except BaseException as exc:  # noqa: BLE001 - named to the scoring side, as the in-process path names it
        return {"kind": "exception", "error": f"{exc.__class__.__name__}: {exc}"[:MAX_ERROR_CHARS]}


def main() -> None:
    answer_fd = os.dup(1)
    os.dup2(2, 1)  # upstream's prints (and its subprocesses') never mix with the answer
    try:
        job = pickle.loads(base64.b64decode(sys.stdin.buffer.read()))
        answer = _answer(job)
    except Exception as exc:  # noqa: BLE001 - a job that does not decode is named, not a traceback
        answer = {"kind": "exception", "error": f"scorer job: {exc.__class__.__name__}: {exc}"[:MAX_ERROR_CHARS]}
    sys.stderr.flush()
    os.write(answer_fd, (json.dumps(answer) + "\n").encode())
    os._exit(0)  # no interpreter teardown: nothing upstream registered at exit runs after the answer


if __name__ == "__main__":
    main()
