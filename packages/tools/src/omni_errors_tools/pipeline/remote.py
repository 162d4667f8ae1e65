"""Stages of the reference pipeline on other hosts: `omni-errors stage`, and `serve`'s link flags.

`serve --remote-stage NAME` expects that stage over the link instead of starting it; `omni-errors
stage NAME --connect ...` runs it on the other host (torch only: it never imports vLLM). The
pipeline's configuration (seed, pacing, faults) stays on the server and travels when the stage
joins. docs/remote.md has the protocol, the deadlines and the key handling.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from omni_errors_cli import HelpFormatter
from omni_errors_tools.pipeline.service import ENGINES, STAGE_NAMES

if TYPE_CHECKING:
    from omni_errors_tools.lifecycle.remote.config import LinkConfig

__all__ = ["TWO_HOSTS", "add_link_arguments", "add_stage_command", "link_config"]

DEFAULT_LINK = "tcp://127.0.0.1:5570"
USAGE = 2  # argparse's exit status for bad arguments; also for unusable key files

TWO_HOSTS = """\
two hosts: the API on 10.0.0.1, code2wav on a GPU host

  # once, on a trusted machine: a key pair per host; copy each NAME.key_secret to its own host only
  omni-errors keys ./keys serve code2wav

  # host A (API): expects code2wav over the link, allows only the code2wav key
  omni-errors serve --host 0.0.0.0 --remote-stage code2wav --link-bind tcp://10.0.0.1:5570 \\
      --link-key keys/serve.key_secret --link-allow keys/code2wav.key

  # host B (GPU): runs code2wav, trusts only the server's public key
  omni-errors stage code2wav --connect tcp://10.0.0.1:5570 \\
      --key keys/code2wav.key_secret --server-key keys/serve.key
"""


def add_link_arguments(p: argparse.ArgumentParser) -> None:
    """`serve`'s flags for remote stages."""
    g = p.add_argument_group("remote stages (see `omni-errors stage --help` for the other host)")
    g.add_argument(
        "--remote-stage",
        action="append",
        default=[],
        choices=STAGE_NAMES,
        metavar="NAME",
        help=f"run this stage on another host instead of here (repeatable; one of {', '.join(STAGE_NAMES)})",
    )
    g.add_argument(
        "--link-bind", default=DEFAULT_LINK, metavar="tcp://ADDR:PORT", help="where remote stages connect (%(default)s)"
    )
    g.add_argument(
        "--link-fd",
        type=int,
        metavar="FD",
        help="an inherited listening socket already bound to --link-bind's address (a launcher binds first)",
    )
    g.add_argument("--link-key", type=Path, metavar="FILE", help="this server's secret key (NAME.key_secret)")
    g.add_argument(
        "--link-allow",
        type=Path,
        action="append",
        default=[],
        metavar="PATH",
        help="a stage's public key file, or a directory of *.key files, allowed to join (repeatable)",
    )
    g.add_argument(
        "--link-plaintext", action="store_true", help="no encryption or authentication: loopback addresses only"
    )
    g.add_argument(
        "--link-timeout",
        type=float,
        default=1.5,
        metavar="S",
        help="a remote stage that leaves a heartbeat unanswered this long is lost: exit 86 (default %(default)s)",
    )
    g.add_argument(
        "--link-heartbeat", type=float, default=0.25, metavar="S", help="heartbeat interval (default %(default)s)"
    )


def link_config(args: argparse.Namespace) -> LinkConfig | None:
    """The LinkConfig `serve`'s flags describe, or None without remote stages (LinkConfigError if wrong)."""
    from omni_errors_tools.lifecycle.remote.config import LinkConfig, LinkConfigError

    if not args.remote_stage:
        if args.link_key or args.link_allow or args.link_plaintext:
            raise LinkConfigError("--link-key/--link-allow/--link-plaintext need a --remote-stage")
        return None
    return LinkConfig(
        args.link_bind,
        secret_key=args.link_key,
        allow=tuple(args.link_allow),
        plaintext=args.link_plaintext,
        heartbeat_interval=args.link_heartbeat,
        timeout=args.link_timeout,
        stage_timeout=max(15.0, 2 * args.link_timeout),
        listen_fd=args.link_fd,
    )


def add_stage_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    stage = sub.add_parser(
        "stage",
        help="run one stage of the reference pipeline for a `serve` on another host",
        description="Run one stage (thinker, talker or code2wav) of the reference pipeline and join the "
        "`omni-errors serve` that expects it remotely (`serve --remote-stage NAME`). The link is "
        "encrypted and authenticated (CURVE) unless --plaintext, which only loopback allows. Exit codes are "
        "the lifecycle's: 0 told to stop, 80/81 fatal, 82 could not join, 83 the server went silent.",
        epilog=TWO_HOSTS,
        formatter_class=HelpFormatter,
    )
    stage.add_argument("name", choices=STAGE_NAMES, metavar="NAME", help=f"the stage: {', '.join(STAGE_NAMES)}")
    stage.add_argument("--connect", default=DEFAULT_LINK, metavar="tcp://ADDR:PORT", help="the server's --link-bind")
    stage.add_argument("--key", type=Path, metavar="FILE", help="this stage's secret key (NAME.key_secret)")
    stage.add_argument("--server-key", type=Path, metavar="FILE", help="the server's public key (NAME.key)")
    stage.add_argument("--plaintext", action="store_true", help="no encryption or authentication: loopback only")
    stage.add_argument(
        "--connect-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="seconds to reach the server and be welcomed (default %(default)s)",
    )
    stage.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    stage.set_defaults(func=_run_stage)


def _run_stage(args: argparse.Namespace) -> int:
    from omni_errors_tools.lifecycle.remote.config import LinkConfigError, StageConnectConfig
    from omni_errors_tools.lifecycle.remote.stage_side import run_remote_stage

    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format=f"%(asctime)s {args.name} %(levelname)s %(name)s: %(message)s",
    )
    try:
        cfg = StageConnectConfig(
            args.connect,
            secret_key=args.key,
            server_key=args.server_key,
            plaintext=args.plaintext,
            connect_timeout=args.connect_timeout,
        )
        cfg.curve_keys()  # a wrong key file is a usage error, said now
    except LinkConfigError as exc:
        sys.stderr.write(f"omni-errors stage: {exc}\n")
        return USAGE
    stage_id = STAGE_NAMES.index(args.name)
    return run_remote_stage(stage_id, args.name, ENGINES[stage_id], cfg)
