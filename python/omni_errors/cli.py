"""The `omni-errors` command line."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _bench(args: argparse.Namespace) -> int:
    from omni_errors import bench

    print("omni-errors codec benchmarks (best of 5, ns per item; ratio < 1 means omni-errors is faster)\n", flush=True)
    text, met = bench.table()
    print(text)
    print("\nevery target met" if met else "\nsome targets missed (marked NO)")
    return 1 if args.strict and not met else 0


def _catalog(args: argparse.Namespace) -> int:
    from omni_errors.catalog import render_catalog

    sys.stdout.write(render_catalog())
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="omni-errors",
        description="Error transport for vLLM-Omni: records, frames, sanitizer, renderers and lifecycle.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = sub.add_parser("bench", help="print the codec ratio table against msgspec, msgpack and cloudpickle")
    bench.add_argument("--strict", action="store_true", help="exit 1 when a DESIGN.md target is missed")
    bench.set_defaults(func=_bench)
    catalog = sub.add_parser("catalog", help="print the error catalogue (Markdown) generated from the classify table")
    catalog.set_defaults(func=_catalog)
    from omni_errors.chaos.cli import add_command as add_chaos
    from omni_errors.pipeline.cli import add_command as add_serve

    add_serve(sub)
    add_chaos(sub)
    return parser


def _version() -> str:
    from omni_errors import __version__

    return __version__


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
