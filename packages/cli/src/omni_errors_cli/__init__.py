"""The `omni-errors` command line.

`catalog` and `keys` are the core's own; every other command comes with the distribution that
provides it, registered in the `omni_errors.commands` entry-point group (a module with an
`add_command(subparsers)`). A command whose distribution, or whose core extra, is not installed
says which one to install instead of failing with a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points, version
from pathlib import Path

# The commands of the other distributions: where each comes from, for the line that says what to install.
PROVIDERS = {
    "serve": "omni-errors-tools",
    "stage": "omni-errors-tools",
    "chaos": "omni-errors-tools",
    "bench": "omni-errors-tools",
    "audit": "omni-errors-audit",
    "doctor": "omni-errors-vllm-omni",
}
# The core extra each built-in command needs (README, "Install").
CORE_EXTRAS = {"keys": "transport"}  # `catalog` reads the classify table's rows, which import no extra
GROUP = "omni_errors.commands"
MISSING = 1


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """The commands' help: descriptions and epilogs as written, and each option's default (unless it
    has none, or its help says it already: `(default`)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if "(default" in text or action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
            return action.help
        return f"{text} (default: %(default)s)"


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


def installed_commands() -> dict[str, str]:
    """Each installed distribution's commands: the command's name and the module that registers it."""
    return {ep.name: ep.value for ep in entry_points(group=GROUP)}


def build_parser(argv: Sequence[str] | None = None, commands: dict[str, str] | None = None) -> argparse.ArgumentParser:
    """The CLI's parser; given `argv`, it imports only the module of the command `argv` names.
    `commands`: `installed_commands()`, when the caller has read them already."""
    commands = installed_commands() if commands is None else commands
    parser = argparse.ArgumentParser(
        prog="omni-errors",
        description="Error transport for vLLM-Omni: records, frames, sanitizer, renderers and lifecycle.",
        epilog="Commands of distributions not installed here: "
        + ", ".join(f"{name} ({dist})" for name, dist in PROVIDERS.items() if name not in commands),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version('omni-errors-cli')}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    catalog = sub.add_parser(
        "catalog",
        help="print the error catalogue (Markdown) generated from the classify table",
        description="Print the error catalogue of docs/errors.md, generated from the classify table.",
        formatter_class=HelpFormatter,
    )
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
        formatter_class=HelpFormatter,
    )
    keys.add_argument("directory", type=Path, metavar="DIR", help="where to write the files (created 0700)")
    keys.add_argument("names", nargs="+", metavar="NAME", help="one key pair per name, e.g. serve code2wav")
    keys.add_argument("--force", action="store_true", help="replace existing files of the same names")
    keys.set_defaults(func=_keys)
    requested = _command_in(argv, commands)
    for module in dict.fromkeys(commands.values()):
        if requested is None or commands[requested] == module:
            importlib.import_module(module).add_command(sub)
    return parser


def _command_in(argv: Sequence[str] | None, commands: dict[str, str]) -> str | None:
    """The installed command `argv` runs, or None (no argv, top-level help, or another command)."""
    words = [a for a in (argv or []) if not a.startswith("-")]
    return words[0] if argv is not None and words and words[0] in commands else None


def _not_installed(argv: Sequence[str], commands: dict[str, str]) -> str | None:
    """The line for a known command whose distribution is not installed here, or None."""
    words = [a for a in argv if not a.startswith("-")]
    if not words or words[0] not in PROVIDERS or words[0] in commands:
        return None
    dist = PROVIDERS[words[0]]
    return f"omni-errors {words[0]} comes with the {dist} distribution; install it with: pip install {dist}\n"


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    commands = installed_commands()  # the entry points, read once per run
    missing = _not_installed(argv, commands)
    if missing is not None:
        sys.stderr.write(missing)
        return MISSING
    args = build_parser(argv, commands).parse_args(argv)
    try:
        return int(args.func(args))
    except ModuleNotFoundError as exc:
        extra = CORE_EXTRAS.get(args.command)
        if extra is None or (exc.name or "omni_errors").split(".")[0] == "omni_errors":
            raise
        sys.stderr.write(
            f"omni-errors {args.command} needs the core's {extra!r} extra (missing module {exc.name!r}); "
            f"install it with: pip install 'omni-errors[{extra}]'\n"
        )
        return MISSING


if __name__ == "__main__":
    sys.exit(main())
