"""`python -m qitos.benchmark.osworld <data root> [split]` prints the metric/getter coverage report."""

from __future__ import annotations

from .coverage import main

raise SystemExit(main())
