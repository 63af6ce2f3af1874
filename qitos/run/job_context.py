"""What every job of a batch shares: the adapter, the run's configuration, the recipe, the models, and how the
agent side is set up (in process, or the confined agent host with its settings and the runner's code snapshot).

Built once per batch (`runner.plan_batch`), then handed to each job (`job.run_job`) and executor.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from qitos.core.task import Task
from qitos.spec.run_spec import ExperimentSpec

from qitos.run.model_server import recorded
from qitos.trace.durability import fsync_path, write_flushed

from qitos.benchmark.base import BenchmarkAdapter, Recipe, RecipeContext, TaskRuntime
from qitos.run.config import RunConfig
from qitos.benchmark.errors import BenchmarkUsageError


def resolve_recipe(adapter: BenchmarkAdapter, cfg: RunConfig) -> Recipe:
    """The batch's recipe. A `--runner` is imported only where it runs: on the agent side when the family's
    sides are split (importing third-party code here would run it in the scoring process), here otherwise."""
    if cfg.runner:
        module, _, attr = cfg.runner.partition(":")
        if not module or not attr:
            raise BenchmarkUsageError(f"--runner '{cfg.runner}' must look like 'package.module:build_agent'")
        if adapter.split_sides and not cfg.validator:
            from qitos.run.sides.host import runner_root

            if runner_root(cfg.runner)[1] is None:
                raise BenchmarkUsageError(f"--runner '{cfg.runner}': no module '{module.split('.')[0]}' on the "
                                          "Python path (run from its directory, or set PYTHONPATH)")
            return Recipe(name=f"runner:{cfg.runner}", build=_built_on_agent_side, description="user-supplied agent")
        if os.getcwd() not in sys.path:  # as `python -m` and the agent side find it: the current directory too
            sys.path.append(os.getcwd())
        try:
            fn = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise BenchmarkUsageError(f"--runner '{cfg.runner}' could not be imported: {exc}") from None
        return Recipe(name=f"runner:{cfg.runner}", build=fn, description="user-supplied agent",
                      needs_model=getattr(fn, "needs_model", True), official=not cfg.validator)
    if cfg.validator:
        raise BenchmarkUsageError("--validator marks a --runner that takes gold; give the --runner too")
    recipes = adapter.recipes()
    name = cfg.recipe or adapter.default_recipe
    if name not in recipes:
        raise BenchmarkUsageError(f"benchmark '{adapter.name}' has no recipe '{name}'; choose one of {', '.join(recipes)}")
    return recipes[name]


def _built_on_agent_side(ctx: RecipeContext):
    raise RuntimeError("a --runner agent is built on the agent side, never in the scoring process")


def batch_model_provider(cfg: RunConfig, recipe: Recipe, *, preflight: bool = False) -> Callable[[], Any]:
    """What each job calls for its model: one shared model, a fresh one per job for stateful models
    (scripted, replay), or `NoModel` for recipes that call none (oracles need no model installed)."""
    if not recipe.needs_model:
        from qitos.models.absent import NoModel

        none = NoModel(f"recipe '{recipe.name}'")
        return lambda: none
    if cfg.model.stateful:
        return cfg.model.build
    shared = cfg.model.build()
    if preflight and not cfg.model.server and hasattr(shared, "preflight"):  # a planned server is not up yet
        shared.preflight()
    return lambda: shared


def prepared_task(adapter: BenchmarkAdapter, cfg: RunConfig, task: Task) -> Task:
    """The task with the batch budget (adapter default, then --max-steps / --task-timeout)."""
    budget = adapter.task_budget(task).model_copy()
    if cfg.max_steps is not None:
        budget.max_steps = cfg.max_steps
    if cfg.task_timeout is not None:
        budget.max_runtime_seconds = cfg.task_timeout
    return task.model_copy(update={"budget": budget})


@dataclass
class JobContext:
    """What every job of one batch shares."""

    cfg: RunConfig
    adapter: BenchmarkAdapter
    recipe: Recipe
    dataset_digest: str
    experiment: ExperimentSpec
    model_provider: Callable[[], Any]
    cancel_event: threading.Event
    selected_tasks: int = 0  # the batch's selection: each row carries it (the headline's denominator)
    run_spec_ref: str | None = None  # the batch's RunSpec fingerprint, also on rows of tasks that never ran
    model_id: str | None = None  # the batch's model identity (e.g. the GGUF name and hash), as rows name it

    host: Any = None  # the agent host (sides.host.AgentHost), started on first use
    spare_hosts: list = field(default_factory=list)  # spawned in planning for the 2nd, 3rd... --workers process
    closure: dict[str, Any] | None = None  # the --runner's code as the scoring side identified it (its snapshot)
    snapshot: Any = None  # code_snapshot.Snapshot of the --runner's import root, taken before the first job

    @property
    def split(self) -> bool:
        """Does this batch's agent run on the agent side (confined), or here (oracles, unsplit families)?"""
        return self.adapter.split_sides and self.recipe.official

    def isolation(self) -> tuple[bool, str]:
        if not self.split:
            if not self.recipe.official:
                return False, f"recipe '{self.recipe.name}' is a validator: it runs on the scoring side, with gold"
            return False, (f"benchmark '{self.adapter.name}' does not yet run its agent side in a separate process: "
                           "the agent shares the scoring process")
        host = self.agent_host()
        return host.confined, host.isolation_detail

    def agent_side_kind(self) -> str:
        if not self.split:
            return "scoring-process"
        return "bwrap" if self.agent_host().confined else "process"

    def agent_processes(self) -> str | None:
        """How tasks share agent processes (`task`, `task-shared-tmp`, `batch`): recorded in the RunSpec."""
        return self.agent_host().mode if self.split else None

    def agent_host(self):
        if self.host is None:
            with _HOST_LOCK:
                if self.host is None:
                    from qitos.run.sides.host import AgentHost

                    self.host = AgentHost(self.host_settings())
        return self.host

    def host_settings(self):
        from qitos.run.sides.host import HostSettings, runner_root

        cfg = self.cfg
        own_client = self.runner_brings_client() and not self.model_relayed()  # then the runner needs the host's
        settings = HostSettings(network=own_client or self.adapter.agent_network(cfg.load),
                                confine=os.environ.get("QITOS_AGENT_CONFINE", "1") != "0",
                                processes=self.agent_processes_setting())
        if cfg.runner:
            root, _ = runner_root(cfg.runner)
            snapshot = self.runner_snapshot()
            if snapshot is not None:  # the copy, mounted in place of the live folder
                settings.snapshot = (snapshot.directory, snapshot.root, snapshot.entries())
                settings.pythonpath.append(snapshot.root)
            elif root:  # the runner is an installed package's: the environment, already shown read-only
                settings.extra_ro.append(root)
                settings.pythonpath.append(root)
        from qitos.models import tokenizer

        if any(tokenizer.present(name=n) for n in tokenizer.ENCODINGS):  # upstream agents count with them; no gold
            settings.extra_ro.append(str(tokenizer.cache_dir().resolve()))
            settings.env["TIKTOKEN_CACHE_DIR"] = str(tokenizer.cache_dir().resolve())
        output = cfg.output or cfg.default_output()
        settings.hidden = hidden_paths([cfg.load.data_dir, cfg.load.root, output, output.parent, cfg.trace_logdir])
        settings.hidden += [str(Path(f).resolve()) for f in _with_bytecode(self.adapter.scoring_side_sources())]
        key = os.environ.get(cfg.model.api_key_env)
        if key and own_client:
            settings.env[cfg.model.api_key_env] = key
        from qitos.run.sides.host import WARM_CLIENT_MODULES

        # a client stack warmed in the host serves every job's child in task mode; a batch process imports it once
        # on first use all the same, so warming it there cost each host about a second of CPU that few runners use
        warm_client = self.runner_brings_client() and self.agent_processes_setting() != "batch"
        settings.warm = [type(self.adapter).__module__, *(WARM_CLIENT_MODULES if warm_client else [])]
        return settings

    def model_is_proxied(self) -> bool:
        """Every model of a split run is called here for the agent side, which counts calls, answers, tokens and
        cost itself (docs/security.md, "Model calls and the network")."""
        return self.recipe.needs_model

    def runner_brings_client(self) -> bool:
        """May a `--runner` call its OpenAI-compatible endpoint with a client of its own? (Its module is imported
        only on the agent side, so the scoring side cannot tell: any runner with an endpoint model may.)"""
        m = self.cfg.model
        return bool(self.cfg.runner) and self.recipe.needs_model and not (m.embedded or m.stateful)

    def model_relayed(self) -> bool:
        """Is the runner's own client relayed (`sides/relay.py`)? Needs a process per task; in `batch` mode the
        runner gets the host's network and the API key instead, and its own calls are not counted."""
        return self.runner_brings_client() and self.agent_processes_setting() != "batch"

    def agent_processes_setting(self) -> str:
        return self.cfg.agent_processes or self.adapter.agent_processes

    def probe_model(self):
        if self._probe_model is None:
            self._probe_model = self.model_provider()
        return self._probe_model

    _probe_model: Any = None
    _named: dict = field(default_factory=dict)

    def job_model(self):
        return self.model_provider()

    def named_model(self, name: str):
        """An extra endpoint model the agent side asks for by name (`make_model(name)`), built once per name; a
        name that would read a file (`scripted:`, `replay:`, `local:`) or start a server is refused."""
        from qitos.models.registry import server_kind

        from qitos.benchmark.contract import AgentCallRefused

        cfg = self.cfg.model.model_copy(update={"model_name": name, "server": None})

        if cfg.embedded or cfg.stateful or server_kind(name) is not None:
            raise AgentCallRefused(f"model '{name}' is not an endpoint model the scoring side calls for the agent")
        with _HOST_LOCK:
            if name not in self._named:
                self._named[name] = cfg.build()
            return self._named[name]

    def runner_snapshot(self):
        """The `--runner`'s import root copied and identified here (`code_snapshot`), once per batch, before the
        agent host starts; None for a recipe or a runner installed as a package (identified with the environment).
        Never anything the agent side reports: it runs this copy."""
        if self.snapshot is not None or not self.cfg.runner:
            return self.snapshot
        from qitos.spec import code_identity, code_snapshot

        from qitos.run.sides.host import runner_root

        root, _ = runner_root(self.cfg.runner)
        if root is None or not code_identity.outside_environment([root]):
            return None
        cfg = self.cfg
        output = cfg.output or cfg.default_output()
        from qitos.run.sides.confine import python_paths

        exclude = [cfg.load.data_dir, cfg.load.root, output, output.parent, cfg.trace_logdir,
                   *_with_bytecode(self.adapter.scoring_side_sources()), *python_paths()]  # QitOS: its own check
        exclude = [Path(p).expanduser() for p in exclude if p]
        try:
            self.snapshot = code_snapshot.take(root, exclude=exclude)
        except code_snapshot.SnapshotRefused as exc:
            raise BenchmarkUsageError(f"--runner '{cfg.runner}': {exc}") from None
        self.closure = code_snapshot.identity(self.snapshot)
        return self.snapshot

    def record_closure(self, run_dir: str | Path) -> None:
        """Keep the sources of the --runner's snapshot (what the agent side ran) in its trace."""
        if not self.cfg.runner or self.snapshot is None or self.closure is None:
            return
        from qitos.spec.code_identity import store_sources

        run_dir = Path(run_dir)
        if self._stored is not None and self._stored.link_into(run_dir):
            return
        listing = store_sources(run_dir, self.closure, copy=(self.snapshot.root, self.snapshot.directory))
        if listing:  # what ran, readable by anyone: the files and where each is kept
            index = run_dir / "agent_code" / "index.json"
            index.parent.mkdir(exist_ok=True)
            write_flushed(index, json.dumps(listing, indent=1).encode("utf-8"))  # the commit flushes only its name
            self._stored = _LinkedSources.of(listing, self.snapshot.root, self.snapshot.directory)

    _stored: "_LinkedSources | None" = None  # the first run's stored sources, linked again for the next runs

    def run_spec_extra(self) -> dict[str, Any]:
        cfg = self.cfg
        code = agent_code(self.recipe, cfg.runner, self.closure if self.split else None)
        return {
            "benchmark_name": cfg.benchmark, "benchmark_split": cfg.load.split, "benchmark_subset": cfg.load.subset,
            "dataset_digest": self.dataset_digest, "agent_code": code, "model_server": recorded(cfg.model.server),
            "metadata": {"recipe": self.recipe.name, "recipe_official": self.recipe.official,
                         "recipe_needs_model": self.recipe.needs_model, "recipe_upstream": self.recipe.upstream,
                         "scorer_official": self.adapter.scorer_official, "scorer_note": self.adapter.scorer_note,
                         "variant": cfg.load.variant, "options": cfg.load.options},
        }

    def model_factory(self) -> Callable[[str | None], Any]:
        """`RecipeContext.make_model`: a closure over the model settings only, so nothing the agent is
        handed leads back to the adapter (and its gold)."""
        provider, model_cfg = self.model_provider, self.cfg.model

        def make_model(name: str | None = None):
            if name is None:
                return provider()
            return model_cfg.model_copy(update={"model_name": name}).build()

        return make_model

    def recipe_context(self, task: Task, runtime: TaskRuntime) -> RecipeContext:
        return RecipeContext(task=task, runtime=runtime, load=self.cfg.load, options=self.cfg.recipe_options(),
                             make_model=self.model_factory(), oracle=self.adapter.oracle_handle(task))


_HOST_LOCK = threading.Lock()


def _with_bytecode(files: list[str]) -> list[str]:
    """Each source file and its cached bytecode, which holds the same constants."""
    out = []
    for name in files:
        path = Path(name)
        out.append(str(path))
        out += [str(p) for p in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc")]
    return out


def hidden_paths(paths: list[Any]) -> list[str]:
    """What the agent host must not show, as existing paths: each path, or for one not created yet (a results
    file, a trace dir) its nearest existing ancestor, unless that ancestor holds what the agent must see
    (then `execute_batch` creates the path before the host starts, so it can be masked)."""
    out = []
    for p in paths:
        if not p:
            continue
        path = Path(p).expanduser().resolve()
        while not path.exists() and path != path.parent:
            path = path.parent
        out.append(str(path))
    return out


def agent_code(recipe: Recipe, runner: str | None, snapshot: dict[str, Any] | None = None) -> dict[str, Any]:
    """What identifies the agent's code: a built-in recipe is QitOS's own; a `--runner` is its module file, found
    without importing it, and on the agent side the snapshot of its import root (`code_snapshot.identity`) that
    the agent host runs: the module's hash and repository state are then the snapshot's."""
    if not runner:
        return {"recipe": recipe.name, "source": "qitos"}
    from qitos.spec.provenance import module_identity, snapshot_module_identity

    module = runner.partition(":")[0]
    if snapshot is not None:
        return {"runner": runner, **snapshot_module_identity(module, snapshot), "closure": snapshot}
    return {"runner": runner, **module_identity(module)}


@dataclass
class _LinkedSources:
    """The sources one run's trace keeps, when each is a link to the batch's read-only snapshot (the usual case):
    every later run of the batch keeps the same files and the same index, so they are linked again without
    resolving, reading or hashing anything (about a millisecond a task at 16 in flight).

    The index is the same for every run too: written once beside the snapshot, flushed, and linked like the
    files. So nothing in a run's `agent_code/` is new content, and a row's commit flushes only the folder's names
    (`durability.run_paths`)."""

    links: list[tuple[str, str]]  # (the snapshot's file, its name under the run folder)
    index: bytes
    index_file: str | None = None  # the index, written once and flushed, linked into each run

    @classmethod
    def of(cls, listing: list[dict[str, Any]], root: str, folder: str) -> "_LinkedSources | None":
        links = []
        for item in listing:
            stored = item.get("stored_as")
            if item.get("note") or (stored is None and item.get("kind") in (None, "source")):
                return None  # something was off (too big, unreadable, changed): each run stores its own
            if stored is not None:
                path = Path(str(item["path"]))
                if not path.is_relative_to(root):
                    return None  # a copy, not a link: stored by each run
                links.append((str(Path(folder) / path.relative_to(root)), str(stored)))
        index = json.dumps(listing, indent=1).encode("utf-8")
        return cls(links, index, _shared_index(index, folder))

    def link_into(self, run_dir: Path) -> bool:
        """Link the files and the index into a fresh `agent_code` folder; False (leaving nothing) when anything
        fails, for the general `store_sources` to do it."""
        folder = os.fspath(run_dir)  # plain strings: a batch links these for every task
        target = f"{folder}/agent_code"
        made: list[str] = []
        try:
            os.mkdir(target)  # fails on anything already there, a symlink too
        except OSError:
            return False
        try:
            for source, name in self.links:
                os.link(source, f"{folder}/{name}", follow_symlinks=False)
                made.append(f"{folder}/{name}")
            made.append(f"{target}/index.json")
            if self.index_file is not None:
                os.link(self.index_file, f"{target}/index.json", follow_symlinks=False)
            else:
                write_flushed(f"{target}/index.json", self.index)
        except OSError:
            for path in made:
                try:
                    os.unlink(path)
                except OSError:
                    pass
            try:
                os.rmdir(target)
            except OSError:
                pass
            return False
        return True


def _shared_index(index: bytes, snapshot: str) -> str | None:
    """`index` stored once, read-only and flushed, beside the snapshot folder (the same file system as its links):
    its path, or None when it cannot be written there."""
    path = f"{snapshot}.index-{hashlib.sha256(index).hexdigest()[:16]}.json"
    if os.path.isfile(path):
        return path
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        write_flushed(tmp, index)
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
        fsync_path(os.path.dirname(path))
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return None
    return path
