"""Official-run checks: a run is official only when every check passes, and the manifest says which failed.

Official means: identified (RunSpec complete, QitOS's and the agent's code identified), benchmark work
described (ExperimentSpec, dataset digest), unaided (a baseline recipe, a real model that was actually
called and answered at least once, no gold taken through the oracle channel), scored by the benchmark's
reference scorer, and a complete trace. A run whose every model call failed (connection errors, say) ends
`model_error` and measures the endpoint, not the agent: `model_answered` keeps it from being official, and
`run_completed` keeps any run that ended `error` or `model_error` from being official whatever else passed.
"""

from __future__ import annotations

from dataclasses import dataclass

from qitos.trace.schema import OfficialCheck

from .provenance import CheckoutState, is_package_install, qitos_checkout_state
from .run_spec import ExperimentSpec, RunSpec

NOT_REAL_MODEL_FAMILIES = frozenset({"scripted", "replay", "none"})


@dataclass(frozen=True)
class RunFacts:
    """What only the run itself knows: how many model calls the agent made and how many its model answered,
    and whether it took gold."""

    model_calls: int = 0  # requests sent, answered or not
    model_responses: int = 0  # requests the model answered (a connection error, a 5xx after retries: not)
    oracle_used: bool = False
    # benchmark runs: (was the agent side in its own confined process, why / how); None outside benchmarks
    isolation: tuple[bool, str] | None = None
    # (did the reference scorer run what the agent made in a confined process, how / why not); None: not applicable
    scorer_isolation: tuple[bool, str] | None = None
    stop_reason: str | None = None  # how the run ended (None while it is in progress)
    uncounted: str | None = None  # which of the agent's model calls could not be counted, and why


FAILED_RUN_REASONS = frozenset({"error", "model_error"})


def check_run_spec(spec: RunSpec) -> OfficialCheck:
    missing = [
        name
        for name, value in (
            ("model_name", spec.model_name),
            ("model_family", spec.model_family),
            ("prompt_protocol", spec.prompt_protocol),
            ("parser_name", spec.parser_name),
            ("tool_manifest", spec.tool_manifest),
            ("environment", spec.environment or None),
            ("seed", spec.seed),
            ("package_version", spec.package_version),
        )
        if value is None
    ]
    if missing:
        return OfficialCheck(check="run_spec_complete", passed=False, detail="missing: " + ", ".join(missing))
    return OfficialCheck(check="run_spec_complete", passed=True, detail="all identity fields recorded")


def check_code_identified(spec: RunSpec, checkout: CheckoutState | None = None) -> OfficialCheck:
    """QitOS by version plus a clean checkout's commit (or a regular install); the agent by its code.

    A QitOS checkout with changed tracked files or untracked .py files in the package (`spec.git_dirty`)
    fails: the commit would not say what ran. `checkout` (default: this process's, when its commit is the
    spec's) only names the files. A --runner is identified by its file's sha256 and its repository's state
    (`agent_code` from `provenance.module_identity`). When `spec.agent_code["closure"]` holds the agent's import
    closure (`code_identity.closure_identity`'s result, see that module), every file of it inside a git work
    tree must be committed as it is ("modified" or "untracked" fail, and so does "unreadable"); a file in no
    repository passes, identified by its sha256 with its source stored in the trace.
    """
    problems: list[str] = []
    qitos = f"qitos {spec.package_version}"
    if spec.git_sha:
        qitos += f" @ {spec.git_sha[:12]}"
        if spec.git_dirty:
            problems.append(_dirty_checkout(spec.git_sha, checkout))
    elif is_package_install():
        qitos += " (package install)"
    else:
        problems.append("QitOS runs from a source tree that is not a git checkout: commit it or install the package")
    parts = [qitos]
    code = spec.agent_code or {}
    if code.get("runner"):
        if not code.get("sha256"):
            problems.append(f"the --runner module file of '{code['runner']}' could not be read")
        else:
            where = code.get("file")
            if code.get("repo_commit"):
                state = "uncommitted changes" if code.get("repo_dirty") else "clean"
                parts.append(f"runner {code['runner']} sha256 {str(code['sha256'])[:12]} in repo "
                             f"@ {str(code['repo_commit'])[:12]} ({state})")
                if code.get("repo_dirty"):
                    problems.append(f"the runner's repository has uncommitted changes ({where}): commit them")
            else:
                parts.append(f"runner {code['runner']} sha256 {str(code['sha256'])[:12]} (not in a git repository)")
    elif code.get("recipe"):
        parts.append(f"recipe {code['recipe']} (QitOS)")
    if "closure" in code:
        closure_parts, closure_problems = _closure_findings(code["closure"])
        parts.extend(closure_parts)
        problems.extend(closure_problems)
    if problems:
        return OfficialCheck(check="code_identified", passed=False, detail="; ".join(problems))
    return OfficialCheck(check="code_identified", passed=True, detail="; ".join(parts))


def _dirty_checkout(sha: str, checkout: CheckoutState | None) -> str:
    state = checkout if checkout is not None else qitos_checkout_state()
    if state is not None and state.commit == sha and state.dirty:
        return (f"the QitOS checkout {state.root} has uncommitted changes ({state.describe()}): "
                "commit them or install the package")
    return f"the QitOS checkout @ {sha[:12]} has uncommitted changes: commit them or install the package"


def _names(paths: list[str], limit: int = 3) -> str:
    return ", ".join(paths[:limit]) + (f", and {len(paths) - limit} more" if len(paths) > limit else "")


def _closure_findings(closure: object) -> tuple[list[str], list[str]]:
    """(what identifies the agent's imported files, what is wrong with them)."""
    files = closure.get("files") if isinstance(closure, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, dict) for f in files):
        return [], ["the agent's import closure is malformed (expected {'files': [{path, sha256, state, ...}]})"]
    by_state: dict[str, list[str]] = {}
    for entry in files:
        by_state.setdefault(str(entry.get("state")), []).append(str(entry.get("path")))
    problems = []
    uncommitted = [f"{p} ({state})" for state in ("modified", "untracked") for p in by_state.get(state, [])]
    if uncommitted:
        problems.append(f"the agent imports files not committed as they are ({_names(uncommitted)}): commit them")
    if by_state.get("unreadable"):
        problems.append(f"the scoring side cannot read files the agent imports ({_names(by_state['unreadable'])}): "
                        "run the agent where its code is readable")
    unshown = [f"{f.get('path')} ({'sourceless bytecode' if f.get('kind') == 'bytecode' else 'extension module'})"
               for f in files if f.get("kind") in ("bytecode", "extension")]
    if unshown:
        problems.append(f"the agent's code holds files with no source to identify ({_names(unshown)}): ship their "
                        "sources, or install compiled code as a package")
    unknown = sorted(set(by_state) - {"clean", "modified", "untracked", "unreadable", "no_repository"})
    if unknown:
        problems.append(f"the agent's import closure has unknown file states ({', '.join(unknown)})")
    if not files:
        return ["agent imports: no files outside the environment and QitOS"], problems
    repos = {str(f.get("repo")) for f in files if f.get("state") == "clean"}
    parts = [f"agent imports: {len(by_state.get('clean', []))} file(s) committed in {len(repos)} repository(ies)"]
    if closure.get("snapshot"):
        parts[0] = (f"agent code: snapshot {str(closure['snapshot'])[:12]} of {closure.get('root')} "
                    f"({len(files)} file(s)), {len(by_state.get('clean', []))} committed in {len(repos)} repository(ies)")
    loose = by_state.get("no_repository", [])
    if loose:
        parts.append(f"{len(loose)} in no repository ({_names(loose)}): identified by sha256, sources kept in the trace")
    return parts, problems


def _benchmark_checks(spec: RunSpec, experiment: ExperimentSpec | None, facts: RunFacts) -> list[OfficialCheck]:
    meta = spec.metadata
    recipe_official = meta.get("recipe_official", True)
    checks = [
        OfficialCheck(check="experiment_spec_present", passed=experiment is not None,
                      detail="present" if experiment else "benchmark run without an ExperimentSpec"),
        OfficialCheck(check="dataset_digest_recorded", passed=bool(spec.dataset_digest),
                      detail=spec.dataset_digest or "no dataset digest"),
        OfficialCheck(check="official_recipe", passed=bool(recipe_official),
                      detail=f"recipe '{meta.get('recipe')}'"
                      + ("" if recipe_official else " is a validator (e.g. an oracle), not a baseline")),
    ]
    scorer = meta.get("scorer_official")
    note = meta.get("scorer_note") or ""
    checks.append(OfficialCheck(
        check="scorer_official", passed=scorer is True,
        detail=(note or "the benchmark's reference scorer") if scorer is True else
        (f"QitOS approximates this benchmark's scorer: {note}" if note else
         "the adapter does not declare its scorer the benchmark's reference one")))
    return checks


def _model_answered(facts: RunFacts) -> OfficialCheck:
    if facts.model_responses > 0:
        return OfficialCheck(check="model_answered", passed=True,
                             detail=f"{facts.model_responses} of {max(facts.model_calls, facts.model_responses)} "
                                    "model call(s) answered")
    if not facts.model_calls:
        return OfficialCheck(check="model_answered", passed=False, detail="no model call, so no model response")
    return OfficialCheck(check="model_answered", passed=False, detail=(
        f"none of the agent's {facts.model_calls} model call(s) was answered (connection errors or failures "
        "after every retry): the run measured the endpoint, not the agent; fix the model server and rerun"))


def _spec_checks(spec: RunSpec) -> tuple[OfficialCheck, OfficialCheck]:
    """`run_spec_complete` and `code_identified`: a batch's runs share a RunSpec, and a trace's checks are computed
    twice, so both are kept per fingerprint (the check objects are never changed once made). Not for a dirty
    checkout, whose check names the checkout's current state."""
    key = None if spec.git_dirty else spec.fingerprint()
    found = _SPEC_CHECKS.get(key) if key is not None else None
    if found is None:
        found = (check_run_spec(spec), check_code_identified(spec))
        if key is not None and len(_SPEC_CHECKS) < 256:
            _SPEC_CHECKS[key] = found
    return found


_SPEC_CHECKS: dict[str, tuple[OfficialCheck, OfficialCheck]] = {}


def official_checks(spec: RunSpec, experiment: ExperimentSpec | None, trace: tuple[bool, str] | None,
                    facts: RunFacts | None = None) -> list[OfficialCheck]:
    """`trace` is the writer's integrity verdict and `facts` what the run did (None while in progress)."""
    facts = facts or RunFacts()
    checks = list(_spec_checks(spec))
    if spec.benchmark_name is not None:
        checks.extend(_benchmark_checks(spec, experiment, facts))
    real = spec.model_family not in NOT_REAL_MODEL_FAMILIES and spec.model_family is not None
    checks.append(OfficialCheck(
        check="real_model", passed=real,
        detail=f"model family '{spec.model_family}'" + ("" if real else " is not a real model")))
    needs_model = spec.metadata.get("recipe_needs_model", True)
    if not needs_model:
        checks.append(OfficialCheck(check="model_called", passed=True, detail="the recipe calls no model"))
        checks.append(OfficialCheck(check="model_answered", passed=True, detail="the recipe calls no model"))
    else:
        detail = (f"{facts.model_calls} model call(s)" if facts.model_calls else
                  "the agent made no model call (an agent that answers without its model is not a baseline)")
        if facts.uncounted:  # say what was not seen, rather than that nothing was called
            detail = (f"{facts.model_calls} model call(s) counted; {facts.uncounted}" if facts.model_calls else
                      f"no model call counted: {facts.uncounted}")
        checks.append(OfficialCheck(check="model_called", passed=facts.model_calls > 0, detail=detail))
        checks.append(_model_answered(facts))
    if facts.isolation is not None:
        checks.append(OfficialCheck(check="agent_isolated", passed=facts.isolation[0], detail=facts.isolation[1]))
    if facts.scorer_isolation is not None:
        checks.append(OfficialCheck(check="scorer_isolated", passed=facts.scorer_isolation[0],
                                    detail=facts.scorer_isolation[1]))
    checks.append(OfficialCheck(
        check="agent_unaided", passed=not facts.oracle_used,
        detail="gold taken through the oracle channel (RecipeContext.oracle_gold)" if facts.oracle_used
        else "no oracle channel used"))
    if facts.stop_reason is not None:
        failed = facts.stop_reason in FAILED_RUN_REASONS
        checks.append(OfficialCheck(
            check="run_completed", passed=not failed,
            detail=f"the run ended '{facts.stop_reason}': it measured a failure of the machinery or the model "
                   "endpoint, not the agent" if failed else f"the run ended '{facts.stop_reason}'"))
    if trace is None:
        checks.append(OfficialCheck(check="trace_complete", passed=False, detail="run in progress"))
    else:
        checks.append(OfficialCheck(check="trace_complete", passed=trace[0], detail=trace[1]))
    return checks
