"""`omni-errors-audit PATH...` (or `python -m omni_errors_audit`): the audit on its own, needing
nothing but the standard library; `omni-errors audit` runs the same where omni-errors-cli is installed."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from omni_errors_audit.cli import add_command


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    add_command(parser.add_subparsers(dest="command", required=True), prog="omni-errors-audit")
    args = parser.parse_args(["audit", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
