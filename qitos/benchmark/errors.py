"""Errors of the benchmark layer that are user mistakes (bad flags, missing data, refused resume)."""


class BenchmarkUsageError(ValueError):
    """Reported by the CLI as `error: ...` with exit code 2."""
