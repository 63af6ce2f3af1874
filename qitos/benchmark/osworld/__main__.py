"""Scoring side (never in a run): `python -m qitos.benchmark.osworld <data root> [split]` prints the metric/getter
coverage report."""

from __future__ import annotations

from qitos.benchmark.osworld.coverage import main

raise SystemExit(main())
