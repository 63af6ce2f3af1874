"""Official-run checks: a run is official only when every check passes, and the manifest says which failed."""

from __future__ import annotations

from qitos.trace.schema import OfficialCheck

from .provenance import is_package_install
from .run_spec import ExperimentSpec, RunSpec

NOT_REAL_MODEL_FAMILIES = frozenset({"scripted", "replay", "none"})


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
    if not spec.git_sha and not is_package_install():
        missing.append("git_sha (or a regular package install)")
    if missing:
        return OfficialCheck(check="run_spec_complete", passed=False, detail="missing: " + ", ".join(missing))
    return OfficialCheck(check="run_spec_complete", passed=True, detail="all identity fields recorded")


def official_checks(spec: RunSpec, experiment: ExperimentSpec | None,
                    trace: tuple[bool, str] | None) -> list[OfficialCheck]:
    """`trace` is the writer's integrity verdict (None while the run is in progress)."""
    benchmark_work = spec.benchmark_name is not None
    checks = [check_run_spec(spec)]
    if benchmark_work:
        checks.append(OfficialCheck(
            check="experiment_spec_present", passed=experiment is not None,
            detail="present" if experiment else "benchmark run without an ExperimentSpec"))
        checks.append(OfficialCheck(
            check="dataset_digest_recorded", passed=bool(spec.dataset_digest),
            detail=spec.dataset_digest or "no dataset digest"))
    else:
        checks.append(OfficialCheck(check="experiment_spec_present", passed=True, detail="not benchmark work"))
        checks.append(OfficialCheck(check="dataset_digest_recorded", passed=True, detail="not benchmark work"))
    if benchmark_work:
        recipe_official = spec.metadata.get("recipe_official", True)
        checks.append(OfficialCheck(
            check="official_recipe", passed=bool(recipe_official),
            detail=f"recipe '{spec.metadata.get('recipe')}'" + ("" if recipe_official else " is a validator (e.g. an oracle), not a baseline")))
    real = spec.model_family not in NOT_REAL_MODEL_FAMILIES and spec.model_family is not None
    checks.append(OfficialCheck(
        check="real_model", passed=real,
        detail=f"model family '{spec.model_family}'" + ("" if real else " is not a real model")))
    if trace is None:
        checks.append(OfficialCheck(check="trace_complete", passed=False, detail="run in progress"))
    else:
        checks.append(OfficialCheck(check="trace_complete", passed=trace[0], detail=trace[1]))
    return checks
