"""The `omni-errors` command line.

Each command needs one extra beyond the core install (`EXTRAS`); run without it, the command says
which one to install instead of failing with a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from pathlib import Path


def _bench(args: argparse.Namespace) -> int:
    from pathlib import Path

    from omni_errors import bench  # a missing baseline (the `bench` extra) is reported by `main`

    print("omni-errors codec benchmarks (best of 5, ns per item; ratio < 1 means omni-errors is faster)\n", flush=True)
    text, met = bench.codec_table()
    print(text, flush=True)
    if not args.codec_only:
        print("\nsanitizer against vLLM's sanitize_message, case by case (ratio: times faster)\n", flush=True)
        corpora = [Path(p) for p in args.corpus] if args.corpus else bench.sanitizer.DEFAULT_CORPORA
        text, sanitizer_met = bench.sanitizer_table(corpora)
        print(text)
        met &= sanitizer_met
    print("\nevery target met" if met else "\nsome targets missed (marked NO)")
    return 1 if args.strict and not met else 0


def _catalog(args: argparse.Namespace) -> int:
    if args.exit_codes:
        from omni_errors.fatal.tables import generated, markdown_table

        sys.stdout.write(generated("exit codes", markdown_table()))
        return 0
    from omni_errors.semantics.catalog import render_catalog

    sys.stdout.write(render_catalog())
    return 0


def _keys(args: argparse.Namespace) -> int:
    from omni_errors.security.keys import KeyFileError, generate

    for name in args.names:
        try:
            public, secret = generate(args.directory, name, force=args.force)
        except (KeyFileError, OSError) as exc:
            sys.stderr.write(f"omni-errors keys: {exc}\n")
            return 1
        print(f"{name}: public key {public} (give to the peer), secret key {secret} (mode 0600, keep on this host)")
    return 0


# Commands registered by their own layer's `add_command`. Only the module of the command being run
# is imported, so that `omni-errors audit` does not pay for the pipeline's imports (~0.2 s).
LAYER_COMMANDS = {
    "serve": "omni_errors.pipeline.commands",
    "stage": "omni_errors.pipeline.commands",
    "chaos": "omni_errors.chaos.command",
    "audit": "omni_errors.audit.cli",
    "doctor": "omni_errors.vllm_omni.doctor",
}


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; given `argv`, it registers only the layer command `argv` names."""
    parser = argparse.ArgumentParser(
        prog="omni-errors",
        description="Error transport for vLLM-Omni: records, frames, sanitizer, renderers and lifecycle.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    bench = sub.add_parser(
        "bench", help="print the codec (msgspec, msgpack, cloudpickle) and sanitizer (vLLM) ratio tables"
    )
    bench.add_argument("--strict", action="store_true", help="exit 1 when a target ratio (the TARGET column) is missed")
    bench.add_argument(
        "--codec-only", action="store_true", help="skip the sanitizer table (it takes two to five minutes)"
    )
    bench.add_argument(
        "--corpus", action="append", metavar="JSONL", help="a labelled sanitizer corpus (default: dev and realistic)"
    )
    bench.set_defaults(func=_bench)
    catalog = sub.add_parser("catalog", help="print the error catalogue (Markdown) generated from the classify table")
    catalog.add_argument(
        "--exit-codes", action="store_true", help="print the exit-code table of docs/lifecycle.md instead"
    )
    catalog.set_defaults(func=_catalog)
    keys = sub.add_parser(
        "keys",
        help="create CURVE key pairs for remote stage links (serve --link-key, stage --key)",
        description="Create a CURVE key pair per name: DIR/NAME.key (public: give it to the peer) and "
        "DIR/NAME.key_secret (mode 0600: keep it on the host that uses it). The server allows stages by "
        "their public keys (serve --link-allow); each stage trusts the server's (stage --server-key).",
    )
    keys.add_argument("directory", type=Path, metavar="DIR", help="where to write the files (created 0700)")
    keys.add_argument("names", nargs="+", metavar="NAME", help="one key pair per name, e.g. serve code2wav")
    keys.add_argument("--force", action="store_true", help="replace existing files of the same names")
    keys.set_defaults(func=_keys)
    requested = _command_in(argv)
    for module in dict.fromkeys(LAYER_COMMANDS.values()):
        if requested is None or LAYER_COMMANDS.get(requested) == module:
            importlib.import_module(module).add_command(sub)
    return parser


def _command_in(argv: Sequence[str] | None) -> str | None:
    """The layer command `argv` runs, or None (no argv, top-level help, or another command)."""
    words = [a for a in (argv or []) if not a.startswith("-")]
    return words[0] if argv is not None and words and words[0] in LAYER_COMMANDS else None


def _version() -> str:
    from omni_errors import __version__

    return __version__


# The extra each command needs (README, "Install").
# The extra each command needs; None: the core install runs it, so a missing module is a defect,
# raised as it is.
EXTRAS: dict[str, str | None] = {
    "audit": None,
    "bench": "bench",
    "catalog": "vllm",
    "keys": "transport",
    "serve": "pipeline",
    "stage": "pipeline",
    "chaos": "pipeline",
    "doctor": "vllm-omni",
}
MISSING_EXTRA = 1


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    try:
        return int(args.func(args))
    except ModuleNotFoundError as exc:
        extra = EXTRAS[args.command]
        if extra is None or (exc.name or "omni_errors").split(".")[0] == "omni_errors":
            raise
        sys.stderr.write(
            f"omni-errors {args.command} needs the {extra!r} extra (missing module {exc.name!r}); "
            f"install it with: pip install 'omni-errors[{extra}]'\n"
        )
        return MISSING_EXTRA


if __name__ == "__main__":
    sys.exit(main())
