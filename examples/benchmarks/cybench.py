"""CyBench through the runner behind `qit bench run --benchmark cybench`.

    python -m examples.benchmarks.cybench --split unguided --limit 3 --model-name gpt-4o-mini \\
        --base-url https://api.openai.com/v1
    python -m examples.benchmarks.cybench --split guided --recipe oracle      # the tasks' own solutions

Data: `qit data fetch cybench`. Tasks run in a bubblewrap sandbox; tasks that need their network services
report `requires_unavailable` unless those services can run here. Same rows and traces as the CLI.
"""

import sys

from examples.benchmarks.common import arguments, run, run_config

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0], split="unguided").parse_args()
    sys.exit(run(run_config("cybench", args)))
