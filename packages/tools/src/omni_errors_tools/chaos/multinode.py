"""vLLM-Omni's multi-node mode on one machine: the chaos harness's launcher for the multi-node scenarios.

`python -m omni_errors_tools.chaos.multinode [options] MODEL -- [head options]` starts a head, `vllm-omni
serve MODEL --omni [head options] --omni-master-address 127.0.0.1 --omni-master-port P --stage-id 1`
(MODEL is a one-stage pipeline, so its stage 0 is remote-only), and one remote stage,
`vllm-omni serve MODEL --omni --stage-id 0 --headless ...`, as a second host would. With `--rejoin`,
a new remote stage starts once the first has ended, as a platform's restart policy would. It exits
with the head's exit code once the head and every remote stage have ended (a remote stage still
running `STAGE_EXIT_GRACE` seconds after the head is killed, and reported). SIGINT and SIGTERM go
to the head. Faults are the fake diffusion engine's prompt markers (`die`, `freeze`, `fatal`,
`oom`), so what the harness sees is one server whose stage runs elsewhere.

Both hosts are this machine's loopback: a cut is what `freeze` does (the remote proc stops, and
says nothing on any link); tests/vllm_omni cuts a real veth pair between two network namespaces.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

__all__ = ["STAGE_EXIT_GRACE", "main"]

#: A remote stage ends itself once its head is gone (its links fail within 2 s); this is the bound.
STAGE_EXIT_GRACE = 30.0
_POLL_S = 0.05
# vLLM-Omni binds the registration port itself, from a number: one is drawn below the kernel's
# ephemeral range (32768 and up here), where nothing else on the machine picks ports at random.
_MASTER_PORTS = (20000, 32000)


def _args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    p = argparse.ArgumentParser(prog="python -m omni_errors_tools.chaos.multinode", description=__doc__)
    p.add_argument("--vllm-omni", default=str(Path(sys.executable).with_name("vllm-omni")), help="the CLI to run")
    p.add_argument("--rejoin", action="store_true", help="start a new remote stage once the first has ended")
    p.add_argument("model", help="the model folder")
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    return p.parse_args(argv[:split]), argv[split + 1 :]


def _master_port() -> int:
    """A port free now, outside the ephemeral range (vLLM-Omni binds it by number)."""
    for _ in range(200):
        port = random.randint(*_MASTER_PORTS)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise OSError("no free port for the registration server")


def _start(argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, start_new_session=True, env=env)


def _end(proc: subprocess.Popen[bytes]) -> int:
    """SIGKILL the process group of `proc` (whatever it left) and reap it."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return proc.wait()  # omni-errors: ignore[OE303]: bounded by the SIGKILL just sent


def _forward(proc: subprocess.Popen[bytes], signum: int) -> None:
    """As a terminal does: to the head's whole process group."""
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


def main(argv: Sequence[str] | None = None) -> int:
    args, head_options = _args(argv)
    master = ["--omni-master-address", "127.0.0.1", "--omni-master-port", str(_master_port())]
    head_argv = [args.vllm_omni, "serve", args.model, "--omni", *head_options, *master, "--stage-id", "1"]
    head = _start(head_argv, dict(os.environ))
    remote_env = {**os.environ, "VLLM_DEVICE_CONTROL_ENV_VAR_PLACEHOLDER": "0"}  # needed on CPU
    remote_argv = [args.vllm_omni, "serve", args.model, "--omni", "--stage-id", "0", "--headless", *master]
    remotes = [_start(remote_argv, remote_env)]
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: _forward(head, signum))
    try:
        while head.poll() is None:
            if args.rejoin and len(remotes) == 1 and remotes[0].poll() is not None:
                print(f"multinode: remote stage exited {remotes[0].returncode}; starting another", file=sys.stderr)
                remotes.append(_start(remote_argv, remote_env))
            time.sleep(_POLL_S)
        deadline = time.monotonic() + STAGE_EXIT_GRACE
        while any(r.poll() is None for r in remotes) and time.monotonic() < deadline:
            time.sleep(_POLL_S)
        for remote in remotes:
            if remote.poll() is None:
                print(f"multinode: a remote stage outlived its head by {STAGE_EXIT_GRACE:g}s; SIGKILL", file=sys.stderr)
        codes = [_end(r) for r in remotes]
        print(f"multinode: head exited {head.returncode}, remote stages {codes}", file=sys.stderr)
        return head.returncode
    finally:
        for proc in (head, *remotes):
            if proc.poll() is None:
                _end(proc)


if __name__ == "__main__":
    sys.exit(main())
