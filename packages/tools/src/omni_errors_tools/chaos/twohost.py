"""`serve` with one stage on a second "host": the chaos harness's launcher for remote scenarios.

`python -m omni_errors_tools.chaos.twohost [options] -- [serve options]` generates a key pair for each
side, starts `omni-errors serve --remote-stage NAME` and `omni-errors stage NAME` joined over the
CURVE link through a relay (`omni_errors_tools.chaos.relay`) on loopback, and exits with `serve`'s exit
code once both have ended. The relay is the bad network: `--delay` adds latency from the start,
`--partition-after BYTES` holds the link (both connections stay open, nothing passes) once that
many bytes of the stage's outputs have crossed it, and writes the time to the fault marker, as
`serve`'s own faults do. SIGINT/SIGTERM go to `serve`. What the harness sees is one server.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from omni_errors_tools.chaos.relay import Relay

__all__ = ["main"]

STAGE_EXIT_GRACE = 30.0  # after serve: the stage ends itself once its server is silent (15 s)


def _args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m omni_errors_tools.chaos.twohost", description=__doc__)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--stage", default="code2wav", help="the stage that runs on the second host")
    p.add_argument("--delay", type=float, default=0.0, help="seconds the relay adds each way")
    p.add_argument("--partition-after", type=int, metavar="BYTES", help="hold the link after this much output")
    p.add_argument("--fault-marker", type=Path, help="where the partition's time is written (and serve's faults')")
    p.add_argument(
        "--pass-fd",
        type=int,
        action="append",
        default=[],
        metavar="FD",
        help="a descriptor serve inherits (repeatable): the launcher's bound HTTP socket that serve's --fd names",
    )
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    return p.parse_args(argv[:split]), argv[split + 1 :]


async def _run(args: argparse.Namespace, serve_args: list[str], keydir: Path) -> int:
    from omni_errors.security import keys

    keys.generate(keydir, "serve")
    keys.generate(keydir, args.stage)
    # Every listener is bound before its port is passed on: the link's socket here, handed to serve
    # (--link-fd), then the relay's. A port chosen first and bound later can be taken meanwhile,
    # even by the relay itself, which then forwards to itself until it runs out of descriptors.
    link_sock = socket.create_server(("127.0.0.1", 0), backlog=64)
    link_port = int(link_sock.getsockname()[1])
    relay = Relay(("127.0.0.1", 0), ("127.0.0.1", link_port), delay=args.delay)
    try:
        await relay.start()
    except BaseException:
        link_sock.close()
        raise
    marker = ["--fault-marker", str(args.fault_marker)] if args.fault_marker else []
    serve = subprocess.Popen(
        [args.python, "-m", "omni_errors_tools.pipeline", "serve", *serve_args, *marker, "--remote-stage", args.stage,
         "--link-bind", f"tcp://127.0.0.1:{link_port}", "--link-fd", str(link_sock.fileno()),
         "--link-key", str(keydir / "serve.key_secret"),
         "--link-allow", str(keydir / f"{args.stage}.key")],
        pass_fds=(link_sock.fileno(), *args.pass_fd),
    )  # fmt: skip
    link_sock.close()  # serve holds it now
    for fd in args.pass_fd:
        os.close(fd)  # serve's alone: a copy held here would queue connections after serve has gone
    stage = subprocess.Popen(
        [args.python, "-m", "omni_errors_cli", "stage", args.stage, "--connect", f"tcp://127.0.0.1:{relay.port}",
         "--key", str(keydir / f"{args.stage}.key_secret"), "--server-key", str(keydir / "serve.key")]
    )  # fmt: skip
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, serve.send_signal, sig)
    partition = asyncio.ensure_future(_partition(args, relay)) if args.partition_after else None
    try:
        while serve.poll() is None:
            await asyncio.sleep(0.05)
        relay.release()  # the stage may hear that its server is gone
        deadline = time.monotonic() + STAGE_EXIT_GRACE
        while stage.poll() is None and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if stage.poll() is None:
            print(f"twohost: the stage outlived its server by {STAGE_EXIT_GRACE:g}s; SIGKILL", file=sys.stderr)
            stage.kill()
        stage_code = stage.wait()  # omni-errors: ignore[OE303]: it exited or was killed just above
        print(f"twohost: serve exited {serve.returncode}, stage {args.stage} exited {stage_code}", file=sys.stderr)
        return serve.returncode
    finally:
        if partition is not None:
            partition.cancel()
        for proc in (serve, stage):
            if proc.poll() is None:
                proc.kill()
                proc.wait()  # omni-errors: ignore[OE303]: bounded by the SIGKILL just sent
        await relay.close()


async def _partition(args: argparse.Namespace, relay: Relay) -> None:
    while relay.forwarded["up"] < args.partition_after:
        await asyncio.sleep(0.01)
    relay.hold()
    if args.fault_marker:
        with open(args.fault_marker, "a") as f:
            f.write(f"{time.time()!r} remote partition\n")
    print(f"twohost: link held after {relay.forwarded['up']} bytes of output", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    args, serve_args = _args(argv)
    keydir = Path(tempfile.mkdtemp(prefix="omni-twohost-keys-"))
    try:
        return asyncio.run(_run(args, serve_args, keydir))
    finally:
        with contextlib.suppress(OSError):
            shutil.rmtree(keydir)


if __name__ == "__main__":
    sys.exit(main())
