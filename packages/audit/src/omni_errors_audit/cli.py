"""`omni-errors audit`: argument parsing, exit codes and output selection; the work is in runner.py.

Registering the command imports nothing else of the audit, so other commands start as fast as before.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from omni_errors_audit.runner import AuditReport

EXIT_OK = 0
EXIT_NEW_SITES = 1
EXIT_USAGE = 2

DESCRIPTION = """\
Inventory the raw raise sites and risky error-handling patterns of Python code (the RFC's migration
inventory), and gate CI on them. Every .py file is parsed with `ast`; directories whose name starts
with a dot and __pycache__ are not entered. Run `omni-errors audit --rules` for what each rule counts.
"""

EPILOG = """\
examples:
  omni-errors audit vllm_omni/                          table of sites by area and rule
  omni-errors audit --package vllm_omni --exit-zero     an installed package, never failing
  omni-errors audit src/ --json > audit.json            everything, machine-readable
  omni-errors audit src/ --sarif -o audit.sarif         for GitHub code scanning
  omni-errors audit src/ --baseline B.json --github     annotations on a pull request's diff
  omni-errors audit src/ --baseline audit-baseline.json --write-baseline    record today's sites
  omni-errors audit src/ --baseline audit-baseline.json                     CI: fail on new sites only

suppress one site, with a reason (a suppression without one is itself reported, OE001):
  raise ValueError(msg)  # omni-errors: ignore[OE101]: argparse-style CLI error, never served

exit codes:
  0  no new site of a gated rule (all covered by the baseline), or --exit-zero, or --write-baseline
  1  sites of gated rules that the baseline does not cover (without --baseline: any such site);
     unparsable files (OE000) and invalid suppressions (OE001) count as sites
  2  usage error: bad option, missing path, unknown package, unreadable baseline
"""


def add_command(sub: argparse._SubParsersAction, prog: str | None = None) -> None:  # type: ignore[type-arg]
    """Register `audit` on the project CLI's subparsers (`prog` names it in usage lines)."""
    p = sub.add_parser(
        "audit",
        help="inventory raw raise sites and risky error handling; gate CI with a baseline",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if prog:
        p.prog = prog
    p.add_argument("paths", nargs="*", metavar="PATH", help="files or directories to audit")
    p.add_argument(
        "--package", action="append", default=[], metavar="NAME", help="audit an installed package (repeatable)"
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the report as JSON")
    fmt.add_argument("--sarif", action="store_true", help="print the report as SARIF 2.1.0")
    fmt.add_argument(
        "--github", action="store_true", help="print GitHub Actions annotations (errors: the new sites of gated rules)"
    )
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="write the report to FILE instead of stdout")
    p.add_argument("--list", action="store_true", help="list every site under the table (default: only new ones)")
    p.add_argument("--baseline", type=Path, metavar="FILE", help="allowlist of known sites: only new ones fail")
    p.add_argument("--write-baseline", action="store_true", help="write the current sites to --baseline FILE")
    p.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are new sites")
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help="skip matching files (counted)")
    p.add_argument("--jobs", type=int, metavar="N", help="worker processes (default: the usable CPUs)")
    p.add_argument("--cache-dir", type=Path, metavar="DIR", help="result cache (default: ~/.cache/omni-errors/audit)")
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (shown only on a terminal)")
    p.add_argument(
        "--rules",
        nargs="?",
        const="text",
        choices=("text", "markdown"),
        help="print what each rule counts and cannot know (text, or the Markdown table of docs/audit.md), then exit",
    )
    p.set_defaults(func=run, parser=p)


def run(args: argparse.Namespace) -> int:
    from omni_errors_audit import baseline
    from omni_errors_audit.discover import package_paths
    from omni_errors_audit.model import AuditInputError
    from omni_errors_audit.rules import markdown_table, text_reference
    from omni_errors_audit.runner import audit

    parser: argparse.ArgumentParser = args.parser
    if args.rules:
        sys.stdout.write(markdown_table() if args.rules == "markdown" else text_reference())
        return EXIT_OK
    if args.write_baseline and args.baseline is None:
        parser.error("--write-baseline needs --baseline FILE")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, not {args.jobs}")
    try:
        paths = list(args.paths)
        for name in args.package:
            paths.extend(package_paths(name))
        if not paths:
            parser.error("give at least one PATH or --package NAME")
        report = audit(
            paths,
            jobs=args.jobs,
            cache_dir=args.cache_dir,
            use_cache=not args.no_cache,
            exclude=args.exclude,
            progress=False if args.no_progress else None,
        )
        if args.baseline is not None and args.write_baseline:
            written = baseline.write(args.baseline, report)
            print(f"omni-errors audit: wrote {written:,} sites to {args.baseline}", file=sys.stderr)
        elif args.baseline is not None:
            baseline.apply(report, baseline.read(args.baseline))
    except AuditInputError as exc:
        print(f"omni-errors audit: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    warning = baseline.mass_fix_warning(report)
    if warning:
        print(f"omni-errors audit: warning: {warning}", file=sys.stderr)
    code = exit_code(report, args.exit_zero or args.write_baseline)
    _emit(args, report, code)
    return code


def exit_code(report: AuditReport, exit_zero: bool) -> int:
    from omni_errors_audit import baseline

    if exit_zero:
        return EXIT_OK
    return EXIT_NEW_SITES if any(baseline.gated(s) and s.new for s in report.sites) else EXIT_OK


def _emit(args: argparse.Namespace, report: AuditReport, code: int) -> None:
    from importlib.metadata import version

    from omni_errors_audit import github, json_report, sarif, table

    tool_version = version("omni-errors-audit")

    if args.json:
        text = json_report.render(report, tool_version)
    elif args.github:
        text = github.render(report, list_sites=args.list)
    elif args.sarif:
        text = sarif.render(report, tool_version, code)
    else:
        text = table.render(report, list_sites=args.list, failing=code == EXIT_NEW_SITES)
    if args.output is not None:
        args.output.write_text(text, encoding="utf-8")
        print(f"omni-errors audit: report written to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
