"""Scoring side: Tau-Bench's `--option` keys, declared (see `qitos.benchmark.options`).

The simulated user (``user_strategy``, ``user_model``, ``user_temperature``, ``user_seed``, ``user_replies``; see
:meth:`.scoring.TauScoring._build_user`) and upstream run.py's options (``start_index``, ``end_index``, ``shuffle``,
``run_seed``, ``num_few_shots``; see :mod:`.run_options`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import field_validator, model_validator

from qitos.benchmark.options import BenchmarkOptions, option

RUN_SEED = 10  # upstream RunConfig.seed
NUM_FEW_SHOTS = 5  # upstream FewShotToolCallingAgent's default

# the user strategies of `.user.USER_STRATEGIES` (kept equal by tests/tau_bench/test_adapter.py)
UserStrategy = Literal["llm", "react", "verify", "reflection", "scripted", "human"]


class TauOptions(BenchmarkOptions):
    user_strategy: UserStrategy = option("llm", "the simulated user: upstream's llm, react, verify, reflection; "
                                                "scripted replays user_replies; human reads the console")
    user_model: str | None = option(None, "the simulated user's model (default: the agent's)", flag="--user-model")
    user_temperature: float | None = option(None, "the user's temperature (default: not sent, as upstream)",
                                            flag="--user-temperature", ge=0)
    user_seed: int | None = option(None, "the user's seed (default: not sent, as upstream)", flag="--user-seed")
    user_top_p: float | None = option(None, "the user's top_p (default: not sent, as upstream)", flag="--user-top-p",
                                      ge=0, le=1)
    user_reasoning_effort: str | None = option(None, "the user's reasoning effort (default: not sent)",
                                               flag="--user-reasoning-effort")
    user_request_timeout: float | None = option(None, "seconds per user model request (default: the model's own)",
                                                flag="--user-request-timeout", gt=0)
    user_max_retries: int | None = option(None, "retries per user model request (default: the model's own)",
                                          flag="--user-max-retries", ge=0)
    user_extra_body: str | None = option(None, "JSON object sent verbatim in each user request (default: none)",
                                         flag="--user-extra-body")
    user_replies: str | None = option(None, "scripted user: a JSON list of replies, or a file with one a line")
    start_index: int = option(0, "first task index of the split (upstream --start-index)", ge=0)
    end_index: int = option(-1, "task index to stop before; -1: to the end (upstream --end-index)",
                            range="-1 (to the end) or an integer >= start_index", ge=-1)
    shuffle: bool = option(False, "shuffle the task order per trial, as upstream --shuffle")
    run_seed: int = option(RUN_SEED, "upstream run.py's --seed: the task order and few-shot draws")
    num_few_shots: int = option(NUM_FEW_SHOTS, "few-shot: examples per task (upstream FewShotToolCallingAgent)", ge=1)

    @field_validator("user_replies")
    @classmethod
    def _replies(cls, value: str | None) -> str | None:
        user_replies(value)  # a ValueError names the problem
        return value

    @model_validator(mode="after")
    def _range(self) -> "TauOptions":
        if self.end_index != -1 and self.end_index < self.start_index:
            raise ValueError(f"--option start_index={self.start_index} end_index={self.end_index}: need "
                             "0 <= start_index <= end_index (end_index -1 means to the end)")
        return self


def user_replies(value: Any) -> list[str] | None:
    """``--option user_replies=...``: a JSON list of strings, or a path to a file of one reply per line."""
    if value is None or value == "":
        return None
    if isinstance(value, list):
        replies = value
    elif str(value).lstrip().startswith("["):
        try:
            replies = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--option user_replies is not a valid JSON list ({exc.msg})") from None
    else:
        path = Path(str(value)).expanduser()
        if not path.is_file():
            raise ValueError(
                f"--option user_replies={value}: no such file (give a JSON list, or a file with one reply a line)"
            )
        replies = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not isinstance(replies, Sequence) or not all(isinstance(reply, str) for reply in replies):
        raise ValueError("--option user_replies must hold strings only")
    return list(replies)
