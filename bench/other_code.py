"""`--code DIR`: a bench that measures another checkout's code (a `git archive` of an older
commit) in the same run as this one's, so the two compare on one noisy machine."""

from __future__ import annotations

import argparse
import sys


def parse(
    description: str | None, *, requests: int, passes: int | None = None
) -> argparse.Namespace:
    """The bench's options; with `--code DIR`, DIR goes first on sys.path, so the project's
    modules the bench imports after this call are DIR's."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--code", help="a checkout to measure (default: this one)")
    parser.add_argument("--requests", type=int, default=requests)
    if passes is not None:
        parser.add_argument("--passes", type=int, default=passes)
    options = parser.parse_args()
    if options.code:
        sys.path.insert(0, options.code)
    return options
