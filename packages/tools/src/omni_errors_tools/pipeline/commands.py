"""`omni-errors serve` and `stage`: `add_command(sub)` registers them on the project CLI's subparsers;
`main()` is `python -m omni_errors_tools.pipeline serve` (what the chaos harness starts)."""

from __future__ import annotations

import argparse
import atexit
import errno
import logging
import socket
import sys
from collections.abc import Sequence

from omni_errors.render.http import RETRY_AFTER_S
from omni_errors_cli import HelpFormatter
from omni_errors_tools.pipeline.defaults import DEFAULT_MAX_BODY_BYTES, DEFAULT_MODEL
from omni_errors_tools.pipeline.faults import PROCESS_KINDS

__all__ = ["SHM_PREFIX", "add_command", "main"]

# Our own prefix: the lifecycle test suite removes new `omni_lc_` segments after each test, which on a
# shared machine would delete a running server's status board.
SHM_PREFIX = "omni_pipe_"


def _serve_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s, loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port to bind (default: %(default)s)")
    p.add_argument(
        "--fd",
        type=int,
        metavar="FD",
        help="serve on this inherited listening socket, already bound by the launcher, instead of "
        "binding --host/--port (so no port is chosen first and bound later)",
    )
    p.add_argument("--model", default=DEFAULT_MODEL, help="served model name (default: %(default)s)")
    p.add_argument(
        "--step-interval", type=float, default=0.02, help="seconds per engine step in each stage (default: %(default)s)"
    )
    p.add_argument(
        "--max-tokens", type=int, default=256, help="largest max_tokens a request may ask (default: %(default)s)"
    )
    p.add_argument(
        "--max-num-seqs",
        type=int,
        nargs=3,
        default=[256, 128, 64],
        metavar=("THINKER", "TALKER", "CODE2WAV"),
        help="requests each stage runs at once; the rest wait (default: 256 128 64)",
    )
    p.add_argument(
        "--stage-timeout",
        type=float,
        default=30.0,
        help="seconds without a stage heartbeat before its requests get 504 (default: %(default)s)",
    )
    p.add_argument("--hang-grace", type=float, default=10.0, help="then seconds before the stage is declared dead")
    p.add_argument("--startup-timeout", type=float, default=300.0, help="deadline for the stages to start")
    p.add_argument(
        "--drain-timeout", type=float, default=10.0, help="on SIGTERM, seconds in-flight requests may finish"
    )
    p.add_argument(
        "--max-body-bytes",
        type=_positive_int,
        default=DEFAULT_MAX_BODY_BYTES,
        metavar="N",
        help="a request body larger than N bytes is answered 413 before it is read, chunked uploads "
        "included (default: %(default)s, 16 MiB: a full-size input audio in base64 and the rest)",
    )
    p.add_argument(
        "--retry-after",
        type=_positive_int,
        default=RETRY_AFTER_S,
        metavar="SECONDS",
        help="the Retry-After of a 503 that does not say when to retry itself (default: %(default)s)",
    )
    p.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"], help="what the log says"
    )
    f = p.add_argument_group("fault injection (off by default; for demos and tests)")
    f.add_argument("--fault", choices=PROCESS_KINDS, help="inject this fault into a stage process")
    f.add_argument("--fault-stage", type=int, default=0, choices=[0, 1, 2], help="0 thinker, 1 talker, 2 code2wav")
    f.add_argument("--fault-after", type=int, default=0, metavar="N", help="fire after N engine steps of that stage")
    f.add_argument("--fault-marker", metavar="FILE", help="append the time each fault fires to FILE")
    f.add_argument(
        "--allow-request-faults",
        action="store_true",
        help="honour X-Omni-Fault headers and omni_fault body fields (otherwise rejected with 400)",
    )


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _inherited_listener(fd: int) -> socket.socket:
    """The listening TCP socket at descriptor `fd` (OSError naming what it is not)."""
    sock = socket.socket(fileno=fd)  # EBADF: no such descriptor; ENOTSOCK: not a socket
    if sock.type != socket.SOCK_STREAM or not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN):
        sock.detach()  # not ours to close
        raise OSError(errno.EINVAL, "not a listening TCP socket")
    sock.set_inheritable(False)  # the stage processes must not keep the port open after serve exits
    return sock


def _listener(host: str, port: int) -> socket.socket:
    """A socket listening on host:port (port 0: a free one), bound before any stage starts, so that a
    taken port is said at once rather than after the stages' start; OSError if it cannot be bound."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: no wait after a restart
        sock.bind((host, port))
        sock.listen(2048)  # uvicorn's backlog
    except OSError:
        sock.close()
        raise
    return sock  # not inheritable (Python's default): the stage processes never hold the port


def _run_serve(args: argparse.Namespace) -> int:
    from omni_errors.fatal.exitcodes import ExitCode
    from omni_errors.fatal.fast_exit import skip_final_collections
    from omni_errors_tools.lifecycle.remote.config import LinkConfigError
    from omni_errors_tools.pipeline.remote import USAGE, link_config

    skip_final_collections()  # its exit deadline is 10 s; torch's teardown alone took 10 s under load
    try:  # before anything heavy is imported: a wrong flag or key file is said at once
        link = link_config(args)
        if link is not None:
            link.curve_keys()
    except LinkConfigError as exc:
        sys.stderr.write(f"omni-errors serve: {exc}\n")
        return USAGE
    if args.fd is not None:
        try:
            listener = _inherited_listener(args.fd)
        except OSError as exc:
            sys.stderr.write(f"omni-errors serve: --fd {args.fd}: {exc.strerror or exc}\n")
            return USAGE
    else:
        try:
            listener = _listener(args.host, args.port)
        except OSError as exc:  # EADDRINUSE, EADDRNOTAVAIL, EACCES, an unknown host name
            sys.stderr.write(
                f"omni-errors serve: cannot listen on {args.host}:{args.port}: {exc.strerror or exc} "
                f"(choose another with --host/--port); exit code {int(ExitCode.CANNOT_LISTEN)}\n"
            )
            return ExitCode.CANNOT_LISTEN
    host, port = listener.getsockname()[:2]

    import asyncio

    from omni_errors_tools.lifecycle import LifecycleConfig
    from omni_errors_tools.pipeline.schemas import Limits
    from omni_errors_tools.pipeline.server import ServeConfig, serve
    from omni_errors_tools.pipeline.service import PipelineConfig

    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    cfg = ServeConfig(
        host=host,
        port=port,
        log_level=args.log_level,
        limits=Limits(
            model=args.model,
            max_tokens=args.max_tokens,
            allow_request_faults=args.allow_request_faults,
            max_body_bytes=args.max_body_bytes,
        ),
        retry_after_s=args.retry_after,
        pipeline=PipelineConfig(
            step_interval=args.step_interval,
            max_num_seqs=tuple(args.max_num_seqs),
            fault=args.fault,
            fault_stage=args.fault_stage,
            fault_after=args.fault_after,
            fault_marker=args.fault_marker,
            remote=tuple(dict.fromkeys(args.remote_stage)),
        ),
        link=link,
        lifecycle=LifecycleConfig(
            startup_timeout=args.startup_timeout,
            heartbeat_timeout=args.stage_timeout,
            hang_grace=args.hang_grace,
            drain_timeout=args.drain_timeout,
            shm_prefix=SHM_PREFIX,
        ),
    )
    code = asyncio.run(serve(cfg, listener))
    log = logging.getLogger(__name__)
    log.info("event loop closed; exit code %d", code)
    atexit.register(log.info, "interpreter shutdown done")
    return code


def add_command(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register `serve` and `stage` on the project CLI's subparsers."""
    from omni_errors_tools.pipeline.remote import TWO_HOSTS, add_link_arguments, add_stage_command

    serve = sub.add_parser(
        "serve",
        help="serve the reference thinker/talker/code2wav pipeline (OpenAI-style API)",
        description="Start three stage processes (thinker, talker, code2wav: tiny torch models on the CPU) "
        "and an OpenAI-style API in front of them; with --remote-stage, a stage joins from another host "
        "instead. Exits non-zero when the pipeline dies (exit codes: docs/lifecycle.md).",
        epilog=TWO_HOSTS,
        formatter_class=HelpFormatter,
    )
    _serve_args(serve)
    add_link_arguments(serve)
    serve.set_defaults(func=_run_serve)
    add_stage_command(sub)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m omni_errors_tools.pipeline")
    add_command(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    code: int = args.func(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
