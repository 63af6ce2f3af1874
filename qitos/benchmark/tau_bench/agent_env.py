"""Agent side: the factory that builds a Tau-Bench task's environment in the agent process.

The scoring side describes it (``TauBenchAdapter.agent_env``) as this module's :func:`build` with JSON
arguments (domain, split, task index, trial, the user strategy's name, the upstream prompt texts the
recipes need, the pristine database's digest) and the domain's files shipped into the work dir under
``tau/`` (the policy, the rules and the tool schemas: :func:`.domain.agent_files`; never a tasks file, nor
the database, which only the scoring side acts on). The scoring side's
in-process runtime (oracles) is built by :func:`build_env` too, on its cached copy of the same domain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from qitos.benchmark.base import TaskRuntime
from qitos.benchmark.tau_bench.domain import AgentDomain, read_agent_domain
from qitos.benchmark.tau_bench.engine_env import TauEngineEnv

FACTORY = "qitos.benchmark.tau_bench.agent_env:build"
FOLDER = "tau"  # where the domain's files land in the agent's work dir


def build(workdir: Path, link: Any, *, domain: str, split: str, task_index: int, trial: int = 0,
          user_strategy: str = "llm", texts: dict[str, Any] | None = None, db_digest: str | None = None) -> TaskRuntime:
    """The agent side's runtime: the env over the shipped domain, talking to the scoring side through `link`."""
    return build_env(read_agent_domain(Path(workdir) / FOLDER, domain), workdir, link, split=split,
                     task_index=task_index, trial=trial, user_strategy=user_strategy, texts=texts, db_digest=db_digest)


def build_env(domain: AgentDomain, workdir: Path | None, link: Any, *, split: str, task_index: int, trial: int = 0,
              user_strategy: str = "llm", texts: dict[str, Any] | None = None,
              db_digest: str | None = None) -> TaskRuntime:
    env = TauEngineEnv(domain, split, task_index, link, trial=trial, user_strategy=user_strategy, texts=texts,
                       db_digest=db_digest)
    return TaskRuntime(env=env, workdir=workdir, handles={"domain": domain.name, "trial": trial})
