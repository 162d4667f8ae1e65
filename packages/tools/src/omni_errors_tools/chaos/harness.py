"""Runs one scenario: a fresh server from its target, the load, and a verdict on every request.

Each scenario's server runs in its own session on a loopback socket the harness binds. It checks: every
request answered (no `lost`: a dropped connection or a stream without its terminal event; no
`hung`: no answer by the deadline), each answer as the scenario expects, no sensitive text in any
error, the server's exit code, no orphan processes and no leftover shared-memory segments.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from omni_errors_tools.chaos.loadgen import Outcome, http_call
from omni_errors_tools.chaos.report import Progress, ScenarioResult
from omni_errors_tools.chaos.scenario import Call, Ctx, Scenario
from omni_errors_tools.chaos.target import Launch
from omni_errors_tools.chaos.watch import ProcessWatcher, kill, shm_entries, unlink_shm
from omni_errors_tools.pipeline.faults import first_fault_time

__all__ = ["HOST", "LEAKS", "run_scenario", "run_scenarios"]

HOST = "127.0.0.1"
# Text that must never reach a client: tracebacks, file paths, compiler internals, credentials, addresses.
LEAKS = re.compile(
    r"Traceback|File \"|/work/|/home/|/root/|/models/|\.safetensors|\.py\b|sk-proj-|XBLOCK|0x[0-9a-fA-F]{8,}"
)
EXIT_GRACE = 30.0  # seconds a server may take to exit after the load before it is killed


async def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return proc.returncode
        await asyncio.sleep(0.05)
    return None


def _since_load(ctx: Ctx, wall: float) -> float:
    """A wall-clock time as seconds after the load started (`ctx.t0`, monotonic)."""
    return wall - (time.time() - (time.monotonic() - ctx.t0))


async def run_scenario(
    sc: Scenario,
    *,
    scale: float,
    progress: bool,
    deadline: float,
    startup_timeout: float,
    step_interval: float,
    python: str = sys.executable,
) -> ScenarioResult:
    """Start the scenario's server, run its load, stop it, and check everything it promised."""
    res = ScenarioResult(sc.name, sc.title, expected_exit=sc.expect_exit, baseline=sc.baseline)
    bar = Progress(sc.name, progress)
    tmp = Path(tempfile.mkdtemp(prefix=f"omni-chaos-{sc.name}-"))
    marker, log_path = tmp / "fault", tmp / "server.log"
    shm_before = shm_entries()
    # The server's socket is bound here and handed over (Launch.listen_fd): a port chosen now and
    # bound later by the server could be taken meanwhile by anything else on the machine.
    with socket.create_server((HOST, 0)) as listener:
        ctx = Ctx(host=HOST, port=int(listener.getsockname()[1]), scale=scale)
        args = tuple(sc.args(ctx))
        launch = Launch(python, HOST, ctx.port, marker, step_interval, startup_timeout, args, listener.fileno())
        command = sc.target.command(launch)
        if listener.fileno() not in command.pass_fds:
            listener.close()  # the server binds the port itself (vLLM's serve): free it for that
        t_start = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                command.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **command.env},
                pass_fds=command.pass_fds,
            )
    # The server holds the socket alone now: when it exits, connections are refused at once.
    watcher = ProcessWatcher(proc.pid)
    stop_watching = asyncio.Event()
    watching = asyncio.create_task(watcher.watch(stop_watching))
    try:
        await _run_load(sc, ctx, proc, res, bar, marker, deadline, startup_timeout, t_start)
        bar.note = "waiting for exit"
        code = await _wait_exit(proc, EXIT_GRACE)
        if code is None:
            res.examples.append(f"server did not exit within {EXIT_GRACE:g}s of the end of the load; SIGKILL")
            os.killpg(proc.pid, signal.SIGKILL)
            code = await _wait_exit(proc, 5.0)
        res.exit_code = code
        t_exit = time.monotonic() - ctx.t0 if ctx.t0 else time.monotonic() - t_start
        fault_wall = first_fault_time(marker)
        if fault_wall is not None and ctx.t0:
            res.t_fault = _since_load(ctx, fault_wall)
        res.t_exit = round(t_exit - (res.t_fault or 0.0), 3)
    finally:
        stop_watching.set()
        await watching
        bar.end()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()  # omni-errors: ignore[OE303]: bounded by the SIGKILL just sent
        # On every path, an interrupted run included: the report names what the server left, and
        # the machine keeps none of it.
        await asyncio.sleep(0.3)
        res.orphans = watcher.orphans()
        kill(res.orphans)
        res.shm_left = watcher.shm_left(shm_before)
        unlink_shm(res.shm_left)
    res.log = str(log_path)
    return res


async def _wait_healthy(
    sc: Scenario, ctx: Ctx, proc: subprocess.Popen[bytes], bar: Progress, startup_timeout: float, t_start: float
) -> None:
    """Until the health path answers 200, the process ends, or the startup deadline passes."""
    limit = time.monotonic() + startup_timeout
    while (left := limit - time.monotonic()) > 0 and proc.poll() is None:
        # A connection waits in the bound socket's backlog until the server serves: bound it too.
        try:
            health = await asyncio.wait_for(http_call(ctx.host, ctx.port, "GET", sc.target.health_path), left)
        except asyncio.TimeoutError:
            return
        if health.status == 200:
            return
        bar.show(ctx.done, ctx.total, time.monotonic() - t_start)
        await asyncio.sleep(0.25)


async def _run_load(
    sc: Scenario,
    ctx: Ctx,
    proc: subprocess.Popen[bytes],
    res: ScenarioResult,
    bar: Progress,
    marker: Path,
    deadline: float,
    startup_timeout: float,
    t_start: float,
) -> None:
    await _wait_healthy(sc, ctx, proc, bar, startup_timeout, t_start)
    res.startup_s = round(time.monotonic() - t_start, 2)
    if not sc.starts or proc.poll() is not None or sc.load is None:
        if sc.starts and proc.poll() is not None:
            res.examples.append(f"server exited during startup with {proc.returncode}")
        ctx.t0 = time.monotonic()
        return
    calls = sc.load(ctx)
    deadline = sc.deadline or deadline
    ctx.total = res.requests = len(calls)
    ctx.t0 = time.monotonic()
    bar.note = "load running"

    async def one(call: Call) -> Outcome:
        try:
            out = await asyncio.wait_for(call(), deadline)
        except asyncio.TimeoutError:
            out = Outcome("?", result="hung")
        ctx.done += 1
        return out

    async def sigint_after_fault(delay: float) -> None:
        while not marker.exists():
            await asyncio.sleep(0.05)
        await asyncio.sleep(delay)
        bar.note = "SIGINT sent"
        proc.send_signal(signal.SIGINT)

    watcher = None
    if sc.sigint_after_fault is not None:
        watcher = asyncio.create_task(sigint_after_fault(sc.sigint_after_fault))
    tasks = [asyncio.create_task(one(c)) for c, _ in calls]
    while not all(t.done() for t in tasks):
        bar.show(ctx.done, ctx.total, time.monotonic() - ctx.t0)
        await asyncio.wait(tasks, timeout=0.25)
    bar.show(ctx.done, ctx.total, time.monotonic() - ctx.t0)
    if watcher is not None:
        watcher.cancel()
    for out, (_, exp) in zip([t.result() for t in tasks], calls, strict=True):
        _judge(res, out, exp.ok(out))
    fault = first_fault_time(marker)
    res.t_fault = None if fault is None else _since_load(ctx, fault)
    res.t_answered = round(max(res.timeline, default=0.0) - (res.t_fault or 0.0), 3)
    if sc.stop_after_load is not None and proc.poll() is None:
        health = await http_call(ctx.host, ctx.port, "GET", sc.target.health_path)
        res.healthy = health.status == 200
        proc.send_signal(sc.stop_after_load)


def _judge(res: ScenarioResult, out: Outcome, expected: bool) -> None:
    """Count one request's outcome into `res`: lost, hung, wrong, leaked, and when it was answered."""
    res.outcomes[out.result] += 1
    res.statuses[f"{out.status} {out.error_type or ''}".strip() if out.result == "error" else str(out.status)] += 1
    if out.result in ("lost", "hung"):
        setattr(res, out.result, getattr(res, out.result) + 1)
    elif not expected:
        res.wrong += 1
        if len(res.examples) < 5:
            res.examples.append(f"wrong: {out.kind} {out.result} {out.status} {out.error_type} stage={out.stage_id}")
    if LEAKS.search(out.raw) or LEAKS.search(out.message):
        res.leaks += 1
        if len(res.examples) < 5:
            res.examples.append(f"leak: {LEAKS.search(out.raw + out.message)}")
    if out.t_done is not None:
        res.timeline.append(out.t_done)


async def run_scenarios(
    scenarios: list[Scenario],
    *,
    scale: float = 1.0,
    progress: bool = True,
    deadline: float = 120.0,
    startup_timeout: float = 300.0,
    step_interval: float = 0.01,
) -> list[ScenarioResult]:
    """Each scenario in turn, each against its own fresh server."""
    return [
        await run_scenario(
            sc,
            scale=scale,
            progress=progress,
            deadline=deadline,
            startup_timeout=startup_timeout,
            step_interval=step_interval,
        )
        for sc in scenarios
    ]
