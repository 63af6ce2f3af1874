"""OSWorld through the runner behind `qit bench run --benchmark osworld`.

    export QITOS_OSWORLD_CONTROLLER=http://<vm-host>:5000     # the OSWorld VM's in-VM controller
    python -m examples.benchmarks.osworld --split test_small --model-name <model> --base-url <url>

Data: `qit data fetch osworld` (and `qit data fetch tokenizer`: the default `prompt-agent` trims the accessibility
tree in gpt-4 tokens, as upstream's PromptAgent does). Without a controller every task is recorded as `requires_unavailable`
(nothing is scored). Same rows and traces as the CLI with the same flags.
"""

import sys

from examples.benchmarks.common import arguments, run, run_config

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0], split="test_small").parse_args()
    sys.exit(run(run_config("osworld", args)))
