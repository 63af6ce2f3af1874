"""Scoring side (data, never in a run): download GAIA with your own Hugging Face token.

`python -m qitos.benchmark.gaia.fetch`. GAIA is gated, so QitOS cannot fetch it for you anonymously; this
puts your copy where `--benchmark gaia` looks by default (`<data dir>/gaia`), then counts what arrived.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from qitos.benchmark.base import default_data_dir
from qitos.benchmark.gaia.dataset import GAIA_SPLITS, GaiaDataError, download_gaia, load_gaia


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m qitos.benchmark.gaia.fetch", description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, default=None,
                        help="where to put the copy (default: <data dir>/gaia; the data dir is $QITOS_DATA_DIR "
                             "or ~/.cache/qitos/data)")
    parser.add_argument("--revision", default=None, help="hub revision (commit or tag) to download")
    args = parser.parse_args(argv)
    target = args.target or default_data_dir() / "gaia"
    try:
        download_gaia(target, revision=args.revision)
    except GaiaDataError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    for split in GAIA_SPLITS:
        try:
            count = len(load_gaia(target, split, require_files=False))
        except GaiaDataError as exc:
            print(f"{split}: not readable ({exc})")
            continue
        print(f"{split}: {count} questions")
    print(f"GAIA copy at {target}; run with `qit bench run --benchmark gaia --root {target}` "
          "(or omit --root when it is <data dir>/gaia)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
