"""`omni-errors chaos`: replay fault scenarios against fresh servers and print the verdict.

Exit status: 0 when every check of every scenario passed (baseline runs, the "before" column of
a before/after comparison, are reported but not counted), 1 when one failed, 2 for a usage error
(argparse's convention, also for an unknown scenario).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from omni_errors.fatal.exitcodes import exit_code_for_signal
from omni_errors_cli import HelpFormatter
from omni_errors_tools.chaos.scenarios import SCENARIOS, TARGETS, of_target

__all__ = ["add_arguments", "add_command", "run_cli"]

ALL_PASSED, SOME_FAILED, USAGE = 0, 1, 2
INTERRUPTED = exit_code_for_signal(signal.SIGINT)  # 130, as `serve` ends on Ctrl+C
VLLM_OMNI_NEEDS = (
    "--target vllm-omni runs the real `vllm-omni serve` on CPU with a fake diffusion engine, "
    "omni_errors_fake_diffusion: a test double that is not part of the omni-errors wheel. From a source "
    "checkout, `make build-omni` installs it with vLLM-Omni 0.30 in .venv-omni; into another vLLM-Omni 0.30 "
    "environment, `pip install tests/vllm_omni/fake_diffusion`."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help=f"scenarios to run (default: every scenario of the target): {', '.join(SCENARIOS)}",
    )
    p.add_argument(
        "--target",
        default="pipeline",
        choices=sorted(TARGETS),
        help="the server the scenarios run against (default: %(default)s, the reference pipeline); vllm-omni "
        "needs a vLLM-Omni 0.30 environment and its test double (see below)",
    )
    p.add_argument("--scale", type=float, default=1.0, help="multiply request counts (0.2: CI size, 200 streams)")
    p.add_argument("--deadline", type=float, default=120.0, help="seconds after which an unanswered request is hung")
    p.add_argument("--startup-timeout", type=float, default=300.0, help="seconds a server may take to start")
    p.add_argument("--step-interval", type=float, default=0.01, help="the servers' --step-interval")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    p.add_argument("--plot", metavar="FILE.png", help="draw requests answered over time, fault marked")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `chaos` on the project CLI's subparsers."""
    chaos = sub.add_parser(
        "chaos",
        help="start fresh servers, inject faults, and check every request is answered",
        description="Replay fault scenarios against fresh servers; report each request's outcome, "
        "time to all answered, exit codes, orphan processes and leftover shm. Exits 1 if any check fails.",
        epilog=VLLM_OMNI_NEEDS,
        formatter_class=HelpFormatter,
    )
    add_arguments(chaos)
    chaos.set_defaults(func=run_cli)


def run_cli(args: argparse.Namespace) -> int:
    mine = {s.name: s for s in of_target(args.target)}
    names = args.scenarios or list(mine)
    unknown = [n for n in names if n not in mine]
    if unknown:
        sys.stderr.write(
            f"unknown scenario(s) {', '.join(unknown)} for target {args.target}; choose from {', '.join(mine)}\n"
        )
        return USAGE
    from omni_errors_tools.chaos.harness import run_scenarios

    progress = not args.no_progress and sys.stderr.isatty()
    try:
        results = asyncio.run(
            run_scenarios(
                [mine[n] for n in names],
                scale=args.scale,
                progress=progress,
                deadline=args.deadline,
                startup_timeout=args.startup_timeout,
                step_interval=args.step_interval,
            )
        )
    except KeyboardInterrupt:  # the running scenario's server and what it left are gone already
        sys.stderr.write("omni-errors chaos: interrupted; no report\n")
        return INTERRUPTED
    from omni_errors_tools.chaos.report import table

    text = table(results)
    if args.json:
        sys.stderr.write(text + "\n")
        json.dump([r.to_json() for r in results], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text + "\n")
    if args.plot:
        from omni_errors_tools.chaos.plot import plot

        plot(results, args.plot)
    return ALL_PASSED if all(r.passed for r in results if not r.baseline) else SOME_FAILED
