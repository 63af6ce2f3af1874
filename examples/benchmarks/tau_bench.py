"""Tau-Bench (retail, airline) through the runner behind `qit bench run --benchmark tau-bench`.

    python -m examples.benchmarks.tau_bench --subset retail --limit 5                 # embedded model
    python -m examples.benchmarks.tau_bench --subset airline --model-name gpt-4o-mini \\
        --base-url https://api.openai.com/v1 --user-model gpt-4o-mini                 # agent and simulated user
    python -m examples.benchmarks.tau_bench --recipe oracle --limit 5                  # gold actions: checks the env

Data: `qit data fetch tau-bench` (or $QITOS_DATA_DIR). Same rows and traces as the CLI with the same flags.
"""

import sys

from examples.benchmarks.common import arguments, run, run_config

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0], subset="retail", split="test").parse_args()
    sys.exit(run(run_config("tau-bench", args)))
