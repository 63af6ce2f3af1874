"""Run identity: RunSpec, ExperimentSpec, provenance and official-run checks."""

from .official import official_checks
from .provenance import environment_summary, git_state, package_version
from .run_spec import ExperimentSpec, RunSpec

__all__ = ["ExperimentSpec", "RunSpec", "environment_summary", "git_state", "official_checks", "package_version"]
