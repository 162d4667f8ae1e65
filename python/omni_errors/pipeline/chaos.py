"""`omni-errors chaos`: fresh servers, injected faults, and a verdict on every request.

Each scenario starts `python -m omni_errors.pipeline serve` in its own session on a free loopback
port, replays its load, and checks: every request answered (no `lost`: a dropped connection or a
stream without its terminal event; no `hung`: no answer by the deadline), each answer's status as
expected, no sensitive text in any error, the server's exit code, no orphan stage processes and
no leftover shared-memory segments. Exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_errors.pipeline.loadgen import Outcome, http_call, sse_call, ws_call

__all__ = ["SCENARIOS", "ScenarioResult", "add_arguments", "run_cli", "run_scenarios"]

HOST = "127.0.0.1"
MODEL = "omni-tiny"
SECRET = "sk-proj-Zq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0d"
# Text that must never reach a client: tracebacks, file paths, compiler internals, credentials, addresses.
LEAKS = re.compile(
    r"Traceback|File \"|/work/|/home/|/root/|/models/|\.safetensors|\.py\b|sk-proj-|XBLOCK|0x[0-9a-fA-F]{8,}"
)
ANY = -1


@dataclass(frozen=True)
class Expect:
    """Acceptable endings: (result, status, stage_id or ANY/None)."""

    allowed: frozenset[tuple[str, int, int | None]]

    def ok(self, o: Outcome) -> bool:
        return any(o.result == r and o.status == s and (st == ANY or o.stage_id == st) for r, s, st in self.allowed)


def expect(*allowed: tuple[str, int, int | None]) -> Expect:
    return Expect(frozenset(allowed))


@dataclass
class Ctx:
    port: int
    scale: float
    t0: float = 0.0
    done: int = 0
    total: int = 0

    def n(self, full: int) -> int:
        return max(4, round(full * self.scale))


Load = Callable[[Ctx], list[tuple[Callable[[], Awaitable[Outcome]], Expect]]]


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    serve_args: Callable[[Ctx], list[str]]
    expect_exit: int
    load: Load | None = None
    sigint_after_fault: float | None = None  # SIGINT the server this long after the fault fired
    stop_after_load: int | None = None  # check /health is 200, then send this signal
    starts: bool = True


def _chat(i: int, *, max_tokens: int, audio: bool, stream: bool = True) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": f"request {i}: tell me a story"}],
        "max_tokens": max_tokens,
        "stream": stream,
        "modalities": ["text", "audio"] if audio else ["text"],
        "seed": i,
    }


def _streams(n_full: int, max_tokens: int, ok_or: Expect, fault_header: str | None = None) -> Load:
    """n concurrent streaming chats with audio; the first carries `fault_header` (a per-request fault)."""

    def load(ctx: Ctx) -> list[tuple[Callable[[], Awaitable[Outcome]], Expect]]:
        def call(i: int) -> Callable[[], Awaitable[Outcome]]:
            headers = {"X-Omni-Fault": fault_header} if fault_header and i == 0 else None
            body = _chat(i, max_tokens=max_tokens, audio=True)
            return lambda: sse_call(HOST, ctx.port, "/v1/chat/completions", body, headers=headers, t0=ctx.t0)

        return [(call(i), ok_or) for i in range(ctx.n(n_full))]

    return load


def _mixed(ctx: Ctx) -> list[tuple[Callable[[], Awaitable[Outcome]], Expect]]:
    """Client errors on every transport, a non-fatal stage error, and good requests in between."""
    p = ctx.port
    good = _chat(0, max_tokens=8, audio=False)
    chat = "/v1/chat/completions"
    cases: list[tuple[Callable[[], Awaitable[Outcome]], Expect]] = [
        (lambda: sse_call(HOST, p, chat, {**good, "model": SECRET}, t0=ctx.t0), expect(("error", 404, None))),
        (
            lambda: http_call(HOST, p, "POST", chat, {**good, "stream": False, "max_tokens": 0}, t0=ctx.t0),
            expect(("error", 400, None)),
        ),
        (
            lambda: http_call(HOST, p, "POST", chat, {"model": MODEL, "messages": "hi"}, t0=ctx.t0),
            expect(("error", 400, None)),
        ),
        (
            lambda: http_call(
                HOST,
                p,
                "POST",
                chat,
                {
                    **good,
                    "stream": False,
                    "messages": [
                        {
                            "role": "user",
                            "content": [
                                {"type": "input_audio", "input_audio": {"data": "bm90IGEgd2F2", "format": "wav"}}
                            ],
                        }
                    ],
                },
                t0=ctx.t0,
            ),
            expect(("error", 422, None)),
        ),
        (
            lambda: http_call(
                HOST, p, "POST", "/v1/audio/speech", {"model": MODEL, "input": "hi", "voice": "nobody"}, t0=ctx.t0
            ),
            expect(("error", 404, None)),
        ),
        (
            lambda: http_call(
                HOST,
                p,
                "POST",
                "/v1/audio/speech",
                {"model": MODEL, "input": "hi", "response_format": "mp3"},
                t0=ctx.t0,
            ),
            expect(("error", 400, None)),
        ),
        (lambda: http_call(HOST, p, "GET", "/v1/jobs/job-missing", t0=ctx.t0), expect(("error", 404, None))),
        (lambda: _job_conflict(p, ctx.t0), expect(("error", 409, None))),
        (
            lambda: sse_call(HOST, p, chat, good, headers={"X-Omni-Fault": "validation"}, t0=ctx.t0),
            expect(("error", 400, None)),
        ),
        (
            lambda: sse_call(HOST, p, chat, good, headers={"X-Omni-Fault": "stage_error;stage=0;after=2"}, t0=ctx.t0),
            expect(("error", 500, 0)),
        ),
        (
            lambda: ws_call(HOST, p, "/v1/chat/ws", {**good, "max_tokens": 10_000}, t0=ctx.t0),
            expect(("error", 400, None)),
        ),
        (lambda: ws_call(HOST, p, "/v1/chat/ws", "{not json", t0=ctx.t0), expect(("error", 400, None))),
        (lambda: ws_call(HOST, p, "/v1/chat/ws", good, t0=ctx.t0), expect(("ok", 200, None))),
        (lambda: sse_call(HOST, p, chat, good, t0=ctx.t0), expect(("ok", 200, None))),
        (lambda: http_call(HOST, p, "POST", chat, {**good, "stream": False}, t0=ctx.t0), expect(("ok", 200, None))),
    ]
    n = ctx.n(300)
    return [cases[i % len(cases)] for i in range(n)]


async def _job_conflict(port: int, t0: float) -> Outcome:
    """A job id used twice: the second create is 409 (the first is running or done)."""
    job_id = f"job-{os.urandom(6).hex()}"
    body = {"model": MODEL, "input": "a job that takes a while to speak", "id": job_id}
    first = await http_call(HOST, port, "POST", "/v1/jobs", body, t0=t0)
    if first.result != "ok":
        return first
    return await http_call(HOST, port, "POST", "/v1/jobs", body, t0=t0)


_FATAL_STAGE1 = expect(("ok", 200, None), ("error", 500, 1))

SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in [
        Scenario(
            "pr-fatal",
            "vLLM PR: 1000 concurrent streams, fatal error in stage 1 after 200 engine steps",
            lambda c: ["--fault", "fatal", "--fault-stage", "1", "--fault-after", str(max(5, round(200 * c.scale)))],
            80,
            _streams(1000, 48, _FATAL_STAGE1),
        ),
        Scenario(
            "oom-last",
            "typed OOM (torch.OutOfMemoryError) in the last stage (code2wav)",
            lambda c: ["--fault", "oom", "--fault-stage", "2", "--fault-after", "3"],
            81,
            _streams(200, 16, expect(("ok", 200, None), ("error", 500, 2))),
        ),
        Scenario(
            "inductor-request",
            "one request asks for an InductorError in the thinker (per-request fault) among 100 streams",
            lambda c: ["--allow-request-faults"],
            80,
            _streams(100, 32, expect(("ok", 200, None), ("error", 500, 0)), fault_header="inductor;stage=0;after=5"),
        ),
        Scenario(
            "startup",
            "a stage fails to start (talker's constructor raises)",
            lambda c: ["--fault", "startup", "--fault-stage", "1"],
            82,
            starts=False,
        ),
        Scenario(
            "sigkill",
            "SIGKILL of the thinker process mid-load",
            lambda c: ["--fault", "sigkill", "--fault-stage", "0", "--fault-after", "10"],
            85,
            _streams(200, 32, expect(("ok", 200, None), ("error", 500, 0))),
        ),
        Scenario(
            "hang-sigint",
            "the talker hangs (a stuck kernel), then the operator presses Ctrl+C",
            lambda c: ["--fault", "hang", "--fault-stage", "1", "--fault-after", "10"],
            130,
            _streams(200, 32, expect(("ok", 200, None), ("error", 503, None), ("error", 503, 1))),
            sigint_after_fault=1.5,
        ),
        Scenario(
            "client-errors",
            "mixed client errors on every transport; the server must stay healthy (then SIGTERM)",
            lambda c: ["--allow-request-faults"],
            143,
            _mixed,
            stop_after_load=signal.SIGTERM,
        ),
    ]
}


@dataclass
class ScenarioResult:
    name: str
    title: str
    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    wrong: int = 0
    leaks: int = 0
    lost: int = 0
    hung: int = 0
    t_fault: float | None = None  # seconds after the load started
    t_answered: float | None = None  # seconds from the fault (or load start) to the last answer
    t_exit: float | None = None  # seconds from the fault (or load start) to the server's exit
    startup_s: float | None = None
    exit_code: int | None = None
    expected_exit: int = 0
    healthy: bool | None = None
    orphans: list[int] = field(default_factory=list)
    shm_left: list[str] = field(default_factory=list)
    timeline: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    log: str = ""

    @property
    def passed(self) -> bool:
        return (
            self.lost == 0
            and self.hung == 0
            and self.wrong == 0
            and self.leaks == 0
            and self.exit_code == self.expected_exit
            and not self.orphans
            and not self.shm_left
            and self.healthy is not False
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "passed": self.passed,
            "requests": self.requests,
            "outcomes": dict(self.outcomes),
            "statuses": dict(self.statuses),
            "lost": self.lost,
            "hung": self.hung,
            "wrong_status": self.wrong,
            "leaks": self.leaks,
            "t_fault_s": self.t_fault,
            "t_all_answered_s": self.t_answered,
            "t_exit_s": self.t_exit,
            "startup_s": self.startup_s,
            "exit_code": self.exit_code,
            "expected_exit": self.expected_exit,
            "healthy_after_load": self.healthy,
            "orphans": self.orphans,
            "shm_left": self.shm_left,
            "examples": self.examples,
            "log": self.log,
        }


# -- process bookkeeping -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _children(pids: set[int]) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid in pids:
            found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def _track(root: int, seen: set[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        seen |= _children({root, *seen})
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except asyncio.TimeoutError:
            pass


def _shm_entries() -> set[str]:
    try:
        return set(os.listdir("/dev/shm"))
    except OSError:
        return set()


# -- running one scenario -----------------------------------------------------------------------


class _Progress:
    def __init__(self, name: str, enabled: bool) -> None:
        self.name, self.enabled = name, enabled
        self.note = "starting server"

    def show(self, ctx: Ctx, t: float) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * ctx.done / ctx.total) if ctx.total else 0
        bar = "#" * filled + "." * (width - filled)
        line = f"\r  {self.name:<14} [{bar}] {ctx.done:>5}/{ctx.total:<5} {t:6.1f}s  {self.note:<28}"
        sys.stderr.write(line)
        sys.stderr.flush()

    def end(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


async def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return proc.returncode
        await asyncio.sleep(0.05)
    return None


def _fault_time(marker: Path) -> float | None:
    try:
        first = marker.read_text().split("\n", 1)[0]
    except OSError:
        return None
    return float(first.split()[0]) if first else None


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
    res = ScenarioResult(sc.name, sc.title, expected_exit=sc.expect_exit)
    ctx = Ctx(port=_free_port(), scale=scale)
    bar = _Progress(sc.name, progress)
    tmp = Path(tempfile.mkdtemp(prefix=f"omni-chaos-{sc.name}-"))
    marker, log_path = tmp / "fault", tmp / "server.log"
    shm_before = _shm_entries()
    args = [
        python,
        "-m",
        "omni_errors.pipeline",
        "serve",
        "--port",
        str(ctx.port),
        "--fault-marker",
        str(marker),
        "--step-interval",
        str(step_interval),
        "--startup-timeout",
        str(startup_timeout),
        *sc.serve_args(ctx),
    ]
    t_start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    seen: set[int] = set()
    stop_tracking = asyncio.Event()
    tracker = asyncio.create_task(_track(proc.pid, seen, stop_tracking))
    try:
        await _run_load(sc, ctx, proc, res, bar, marker, deadline, startup_timeout, t_start)
        bar.note = "waiting for exit"
        code = await _wait_exit(proc, 30.0)
        if code is None:
            res.examples.append("server did not exit within 30s of the end of the load; SIGKILL")
            os.killpg(proc.pid, signal.SIGKILL)
            code = await _wait_exit(proc, 5.0)
        res.exit_code = code
        t_exit = time.monotonic() - ctx.t0 if ctx.t0 else time.monotonic() - t_start
        fault_wall = _fault_time(marker)
        if fault_wall is not None and ctx.t0:
            res.t_fault = fault_wall - (time.time() - (time.monotonic() - ctx.t0))
        base = res.t_fault or 0.0
        res.t_exit = round(t_exit - base, 3)
    finally:
        stop_tracking.set()
        await tracker
        bar.end()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    await asyncio.sleep(0.3)
    res.orphans = sorted(pid for pid in seen if _alive(pid))
    for pid in res.orphans:  # the report names them; the machine should not keep them
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    pids = {str(proc.pid), *map(str, seen)}
    res.shm_left = sorted(n for n in _shm_entries() - shm_before if any(p in n for p in pids))
    res.log = str(log_path)
    return res


async def _run_load(
    sc: Scenario,
    ctx: Ctx,
    proc: subprocess.Popen[bytes],
    res: ScenarioResult,
    bar: _Progress,
    marker: Path,
    deadline: float,
    startup_timeout: float,
    t_start: float,
) -> None:
    # Wait for /health 200 (or, for a startup failure, for the process to end).
    limit = time.monotonic() + startup_timeout
    while time.monotonic() < limit and proc.poll() is None:
        health = await http_call(HOST, ctx.port, "GET", "/health")
        if health.status == 200:
            break
        bar.show(ctx, time.monotonic() - t_start)
        await asyncio.sleep(0.25)
    res.startup_s = round(time.monotonic() - t_start, 2)
    if not sc.starts or proc.poll() is not None or sc.load is None:
        if sc.starts and proc.poll() is not None:
            res.examples.append(f"server exited during startup with {proc.returncode}")
        ctx.t0 = time.monotonic()
        return
    calls = sc.load(ctx)
    ctx.total = res.requests = len(calls)
    ctx.t0 = time.monotonic()
    bar.note = "load running"

    async def one(call: Callable[[], Awaitable[Outcome]]) -> Outcome:
        try:
            out = await asyncio.wait_for(call(), deadline)
        except asyncio.TimeoutError:
            out = Outcome("?", result="hung")
        ctx.done += 1
        return out

    async def sigint_watch() -> None:
        while not marker.exists():
            await asyncio.sleep(0.05)
        assert sc.sigint_after_fault is not None
        await asyncio.sleep(sc.sigint_after_fault)
        bar.note = "SIGINT sent"
        proc.send_signal(signal.SIGINT)

    watcher = asyncio.create_task(sigint_watch()) if sc.sigint_after_fault is not None else None
    tasks = [asyncio.create_task(one(c)) for c, _ in calls]
    while not all(t.done() for t in tasks):
        bar.show(ctx, time.monotonic() - ctx.t0)
        await asyncio.wait(tasks, timeout=0.25)
    bar.show(ctx, time.monotonic() - ctx.t0)
    if watcher is not None:
        watcher.cancel()
    outcomes = [t.result() for t in tasks]
    for out, (_, exp) in zip(outcomes, calls, strict=True):
        res.outcomes[out.result] += 1
        res.statuses[f"{out.status} {out.error_type or ''}".strip() if out.result == "error" else str(out.status)] += 1
        if out.result in ("lost", "hung"):
            setattr(res, out.result, getattr(res, out.result) + 1)
        elif not exp.ok(out):
            res.wrong += 1
            if len(res.examples) < 5:
                res.examples.append(
                    f"wrong: {out.kind} {out.result} {out.status} {out.error_type} stage={out.stage_id}"
                )
        if LEAKS.search(out.raw) or LEAKS.search(out.message):
            res.leaks += 1
            if len(res.examples) < 5:
                res.examples.append(f"leak: {LEAKS.search(out.raw + out.message)}")
        if out.t_done is not None:
            res.timeline.append(out.t_done)
    fault = _fault_time(marker)
    res.t_fault = None if fault is None else fault - (time.time() - (time.monotonic() - ctx.t0))
    last = max(res.timeline, default=0.0)
    res.t_answered = round(last - (res.t_fault or 0.0), 3)
    if sc.stop_after_load is not None and proc.poll() is None:
        health = await http_call(HOST, ctx.port, "GET", "/health")
        res.healthy = health.status == 200
        proc.send_signal(sc.stop_after_load)


async def run_scenarios(
    names: list[str],
    *,
    scale: float = 1.0,
    progress: bool = True,
    deadline: float = 120.0,
    startup_timeout: float = 300.0,
    step_interval: float = 0.01,
) -> list[ScenarioResult]:
    results = []
    for name in names:
        results.append(
            await run_scenario(
                SCENARIOS[name],
                scale=scale,
                progress=progress,
                deadline=deadline,
                startup_timeout=startup_timeout,
                step_interval=step_interval,
            )
        )
    return results


# -- reporting ----------------------------------------------------------------------------------


def table(results: list[ScenarioResult]) -> str:
    head = (
        "scenario",
        "reqs",
        "ok",
        "err",
        "lost",
        "hung",
        "wrong",
        "leak",
        "answered",
        "exit@",
        "code",
        "orph",
        "shm",
        "",
    )
    rows = [head]
    for r in results:
        rows.append(
            (
                r.name,
                str(r.requests),
                str(r.outcomes.get("ok", 0)),
                str(r.outcomes.get("error", 0)),
                str(r.lost),
                str(r.hung),
                str(r.wrong),
                str(r.leaks),
                "-" if r.t_answered is None or not r.requests else f"{r.t_answered:.2f}s",
                "-" if r.t_exit is None else f"{r.t_exit:.2f}s",
                f"{r.exit_code}/{r.expected_exit}",
                str(len(r.orphans)),
                str(len(r.shm_left)),
                "PASS" if r.passed else "FAIL",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    notes = [
        "answered/exit@: seconds from the fault firing (or from the start of the load) to the last answer / to exit;",
        "code: exit code got/expected; orph: stage processes alive after exit; shm: segments left in /dev/shm.",
    ]
    for r in results:
        for ex in r.examples:
            notes.append(f"{r.name}: {ex}")
        if not r.passed:
            notes.append(f"{r.name}: server log {r.log}")
    return "\n".join([*lines, "", *notes])


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "scenarios",
        nargs="*",
        metavar="SCENARIO",
        help=f"scenarios to run (default: all): {', '.join(SCENARIOS)}",
    )
    p.add_argument("--scale", type=float, default=1.0, help="multiply request counts (0.2: CI size, 200 streams)")
    p.add_argument("--deadline", type=float, default=120.0, help="seconds after which an unanswered request is hung")
    p.add_argument("--startup-timeout", type=float, default=300.0, help="seconds a server may take to start")
    p.add_argument("--step-interval", type=float, default=0.01, help="the servers' --step-interval")
    p.add_argument("--json", action="store_true", help="print the results as JSON on stdout (table on stderr)")
    p.add_argument("--plot", metavar="FILE.png", help="draw requests answered over time, fault marked")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def run_cli(args: argparse.Namespace) -> int:
    names = args.scenarios or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        sys.stderr.write(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}\n")
        return 2
    progress = not args.no_progress and sys.stderr.isatty()
    results = asyncio.run(
        run_scenarios(
            names,
            scale=args.scale,
            progress=progress,
            deadline=args.deadline,
            startup_timeout=args.startup_timeout,
            step_interval=args.step_interval,
        )
    )
    text = table(results)
    if args.json:
        sys.stderr.write(text + "\n")
        json.dump([r.to_json() for r in results], sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(text + "\n")
    if args.plot:
        from omni_errors.pipeline.plot import plot

        plot(results, args.plot)
    return 0 if all(r.passed for r in results) else 1
