"""`python -m omni_errors.audit PATH...`: the `omni-errors audit` command on its own, without building
the parsers (and importing the modules) of the project's other commands."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from omni_errors.audit.cli import add_command


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    add_command(parser.add_subparsers(dest="command", required=True), prog="python -m omni_errors.audit")
    args = parser.parse_args(["audit", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
