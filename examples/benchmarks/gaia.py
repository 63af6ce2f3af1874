"""GAIA through the runner behind `qit bench run --benchmark gaia`.

    python -m examples.benchmarks.gaia --root ~/data/GAIA --split validation --limit 5 \\
        --model-name gpt-4o-mini --base-url https://api.openai.com/v1

GAIA is gated on Hugging Face: use your own copy (`--root`, or `gaia/` in the data directory). Same rows and
traces as the CLI with the same flags; `qit bench export --format gaia-submission` turns test-split rows into
a leaderboard submission.
"""

import sys

from examples.benchmarks.common import arguments, run, run_config

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0], split="validation").parse_args()
    sys.exit(run(run_config("gaia", args)))
