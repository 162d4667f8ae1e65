"""`omni-errors bench`: the codec and sanitizer ratio tables, printed as they are measured."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from omni_errors_cli import HelpFormatter


def add_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `bench` on the `omni-errors` command's subparsers."""
    bench = sub.add_parser(
        "bench",
        help="print the codec (msgspec, msgpack, cloudpickle) and sanitizer (vLLM) ratio tables",
        description="Measure omni-errors side by side with its baselines, each figure in the same run as its "
        "baseline: the frame codec against msgspec, msgpack and cloudpickle, and the sanitizer against vLLM's "
        "sanitize_message, case by case: the installed vLLM's and that of each --vllm-env, newest first.",
        formatter_class=HelpFormatter,
    )
    bench.add_argument("--strict", action="store_true", help="exit 1 when a target ratio (the TARGET column) is missed")
    bench.add_argument(
        "--codec-only", action="store_true", help="skip the sanitizer table (it takes two to five minutes)"
    )
    bench.add_argument(
        "--corpus", action="append", metavar="JSONL", help="a labelled sanitizer corpus (default: dev and realistic)"
    )
    bench.add_argument(
        "--vllm-env",
        action="append",
        type=Path,
        metavar="VENV",
        help="a virtual environment with another vLLM release, measured beside the installed one "
        "(for example .venv-vllm034)",
    )
    bench.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from omni_errors_tools import bench

    print("omni-errors codec benchmarks (best of 5, ns per item; ratio < 1 means omni-errors is faster)\n", flush=True)
    text, met = bench.codec_table()
    print(text, flush=True)
    if not args.codec_only:
        print("\nsanitizer against vLLM's sanitize_message, case by case (ratio: times faster)\n", flush=True)
        corpora = [Path(p) for p in args.corpus] if args.corpus else bench.sanitizer.DEFAULT_CORPORA
        try:
            text, sanitizer_met = bench.sanitizer_table(corpora, args.vllm_env or ())
        except ValueError as exc:  # a --vllm-env without vLLM
            print(f"omni-errors bench: {exc}", file=sys.stderr)
            return 2
        print(text)
        met &= sanitizer_met
    print("\nevery target met" if met else "\nsome targets missed (marked NO)")
    return 1 if args.strict and not met else 0
