"""A real `omni-errors serve` process on an ephemeral loopback port: started, and stopped with a check
that no stage process and no shared memory segment of it is left behind.

A module of its own (not `conftest`): pytest given several test directories loads each one's
`conftest`, and `from conftest import` gets whichever came last."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from omni_errors_tools.chaos.watch import ProcessWatcher, kill

STARTUP_TIMEOUT = 240.0  # vLLM's import alone takes 15-60 s on two shared cores


@dataclass
class Server:
    base: str
    ws: str
    proc: subprocess.Popen[bytes]
    log: Path
    watcher: ProcessWatcher


def start_server(*extra: str) -> Server:
    log = Path(tempfile.mkdtemp(prefix="omni-pipeline-test-")) / "server.log"
    # Bound here and handed to serve (--fd): a port chosen first and bound later can be taken meanwhile.
    with socket.create_server(("127.0.0.1", 0)) as listener, open(log, "wb") as f:
        port = int(listener.getsockname()[1])
        args = [sys.executable, "-m", "omni_errors_tools.pipeline", "serve", "--fd", str(listener.fileno()), *extra]
        proc = subprocess.Popen(
            args, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, pass_fds=(listener.fileno(),)
        )
    server = Server(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}", proc, log, ProcessWatcher(proc.pid))
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        server.watcher.poll()
        if proc.poll() is not None:
            break
        try:
            if httpx.get(f"{server.base}/health", timeout=2).status_code == 200:
                return server
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    stop_server(server)
    raise RuntimeError(f"server did not start; log: {log.read_text()[-3000:]}")


def stop_server(server: Server, sig: int = signal.SIGTERM, timeout: float = 30.0) -> int | None:
    """Stop the server (if still running) and check it left nothing behind; returns its exit code."""
    server.watcher.poll()
    if server.proc.poll() is None:
        server.proc.send_signal(sig)
    try:
        code: int | None = server.proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        code = None
    time.sleep(0.3)
    orphans = server.watcher.orphans()
    kill(orphans)
    leaked = server.watcher.shm_left()
    for name in leaked:
        Path("/dev/shm", name).unlink(missing_ok=True)
    assert code is not None, f"server ignored signal {sig} for {timeout}s; log {server.log}"
    assert not orphans, f"orphan processes: {orphans}"
    assert not leaked, f"leftover shared memory: {leaked}"
    return code
