"""What watching a multi-node stage link costs, and how fast it sees a peer go (`omni_errors.link_watch`).

Two processes hold a stage link the way a head and a remote `StageDiffusionProc` do: the "head"
binds a PUSH and a PULL, the "stage" connects to them (TCP on loopback). Side by side in one run:

- idle cost: CPU of each process over `--idle` seconds, with the plugin's ZMTP heartbeats and
  socket monitor (`link_watch.LinkWatch`) and without them (vLLM-Omni 0.30's sockets), as % of a core;
- detection: the stage is SIGKILLed (its connections reset) or SIGSTOPped (silent, as a cut host
  is) and the head's watch reports the loss; without the watch nothing ever does (checked for
  `--give-up` seconds).

    .venv-omni/bin/python benches/multinode_liveness.py [--idle 30] [--repeat 5]

The link's own numbers; the real head and stage are measured by tests/vllm_omni/test_multinode_*.py
and `omni-errors chaos` (docs/vllm-omni.md, "Multi-node").
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing as mp
import os
import signal
import statistics
import threading
import time
from typing import Any

import zmq
from omni_errors import link_watch
from omni_errors.link_watch import LinkWatch

_PUSH, _PULL = "tcp://127.0.0.1:{}", "tcp://127.0.0.1:{}"


def _ports() -> tuple[int, int]:
    import socket

    taken = []
    for _ in range(2):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        taken.append(s)
    ports = tuple(s.getsockname()[1] for s in taken)
    for s in taken:
        s.close()
    return ports  # type: ignore[return-value]


def _open(ctx: zmq.Context[Any], kinds: tuple[int, int], endpoints: tuple[str, str], *, bind: bool, watch: bool,
          on_lost: Any) -> list[zmq.Socket[Any]]:  # fmt: skip
    watcher = LinkWatch("bench", endpoints) if watch else None
    if watcher is not None:
        watcher.when_lost(on_lost)
    sockets = []
    for kind, endpoint in zip(kinds, endpoints, strict=True):
        sock = ctx.socket(kind)
        if watcher is None:
            (sock.bind if bind else sock.connect)(endpoint)
        else:
            (watcher.bind if bind else watcher.connect)(sock, endpoint)
        sockets.append(sock)
    return sockets


def _stage(endpoints: tuple[str, str], watch: bool, ready: Any, stop: Any, cpu: Any) -> None:
    ctx: zmq.Context[Any] = zmq.Context()
    pull, push = _open(ctx, (zmq.PULL, zmq.PUSH), endpoints, bind=False, watch=watch, on_lost=lambda _r: None)
    pull.recv()
    push.send(b"pong")
    start = os.times()
    ready.set()
    stop.wait()
    end = os.times()
    cpu.value = (end.user - start.user) + (end.system - start.system)
    for s in (pull, push):
        s.close(linger=0)
    ctx.term()


def _run(watch: bool, idle: float, fault: int | None, give_up: float) -> dict[str, float | None]:
    ports = _ports()
    endpoints = (_PUSH.format(ports[0]), _PULL.format(ports[1]))
    lost = threading.Event()
    seen: list[float] = []

    def on_lost(_reason: str) -> None:
        seen.append(time.monotonic())
        lost.set()

    ctx: zmq.Context[Any] = zmq.Context()
    push, pull = _open(ctx, (zmq.PUSH, zmq.PULL), endpoints, bind=True, watch=watch, on_lost=on_lost)
    spawn = mp.get_context("spawn")
    ready, stop, cpu = spawn.Event(), spawn.Event(), spawn.Value("d", -1.0)
    stage = spawn.Process(target=_stage, args=(endpoints, watch, ready, stop, cpu))
    stage.start()
    try:
        push.send(b"ping")
        pull.recv()
        ready.wait(30)
        result: dict[str, float | None] = {}
        if fault is None:
            start = os.times()
            time.sleep(idle)
            end = os.times()
            stop.set()
            stage.join(30)
            result["head_cpu_pct"] = 100 * ((end.user - start.user) + (end.system - start.system)) / idle
            result["stage_cpu_pct"] = 100 * cpu.value / idle
        else:
            faulted = time.monotonic()
            os.kill(stage.pid, fault)  # type: ignore[arg-type]
            result["detected_s"] = seen[0] - faulted if lost.wait(give_up) else None
        return result
    finally:
        if stage.is_alive():
            os.kill(stage.pid, signal.SIGKILL)  # type: ignore[arg-type]
        stage.join(30)
        for s in (push, pull):
            s.close(linger=0)
        ctx.term()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--idle", type=float, default=30.0, help="seconds of idle link measured per configuration")
    p.add_argument("--repeat", type=int, default=5, help="detections measured per fault")
    p.add_argument("--give-up", type=float, default=10.0, help="seconds a detection is waited for")
    args = p.parse_args()
    logging.getLogger(link_watch.__name__).setLevel(logging.CRITICAL)  # each loss is a figure here, not a log line
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    for watch in (False, True):
        name = "plugin (heartbeats + monitor)" if watch else "vLLM-Omni 0.30 (no watch)   "
        idle = _run(watch, args.idle, None, args.give_up)
        print(f"{name}  idle CPU: head {idle['head_cpu_pct']:.3f} %, stage {idle['stage_cpu_pct']:.3f} % of a core")
        for label, sig in (("SIGKILL", signal.SIGKILL), ("SIGSTOP", signal.SIGSTOP)):
            times = [_run(watch, 0, sig, args.give_up)["detected_s"] for _ in range(args.repeat)]
            found = [t for t in times if t is not None]
            if not found:
                print(f"{name}  {label}: not detected within {args.give_up:g} s ({args.repeat} of {args.repeat})")
                continue
            print(
                f"{name}  {label}: detected in median {1000 * statistics.median(found):.1f} ms, "
                f"max {1000 * max(found):.1f} ms ({len(found)} of {len(times)})"
            )
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
