"""The desktop starter tasks through the runner behind `qit bench run --benchmark desktop-starter`.

    python -m examples.benchmarks.desktop_starter --limit 3                   # embedded model, real Xvfb desktop
    python -m examples.benchmarks.desktop_starter --recipe oracle             # scripted solutions: checks the setup

Needs Xvfb, openbox, xdotool and python3-tk (Debian packages; no VM, no data download). Same rows and traces
as the CLI with the same flags.
"""

import sys

from examples.benchmarks.common import arguments, run, run_config

if __name__ == "__main__":
    args = arguments(__doc__.splitlines()[0]).parse_args()
    sys.exit(run(run_config("desktop-starter", args)))
