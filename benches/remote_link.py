"""Measure the remote stage link (run: `python benches/remote_link.py`; as root the two sides run
in two network namespaces joined by a veth pair, CURVE on; without root, on loopback).

- detection: a remote stage SIGKILLed, SIGSTOPped (TCP stays up) or cut off (`ip link set down`,
  root only) while 20 requests are in flight: stop -> loss declared, loss -> all answered.
- throughput: error frames/s from a stage to the supervisor (decoded there, from the zmq.Frame
  buffers), batches of 1, 16 and 256 frames; baselines in the same run: plaintext ZMQ on loopback
  and the local pipe link.
- heartbeat: CPU (% of one core) of an idle supervisor and an idle remote stage over `--idle`
  seconds; baseline: an idle supervisor with one local stage.
- memory: the supervisor's RSS per idle remote link (1, 8 and 32 links).

The remote stage here is an echo engine without torch, so each run starts in a second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import omni_errors
from omni_errors.security import keys
from omni_errors_tools.lifecycle import LifecycleConfig, StageOutput, StageRequestError, StageSpec, Supervisor
from omni_errors_tools.lifecycle.engine import RemoteStageSpec
from omni_errors_tools.lifecycle.remote.config import LinkConfig, StageConnectConfig
from omni_errors_tools.lifecycle.remote.messages import Hello
from omni_errors_tools.lifecycle.remote.stage_side import ZmqWorkerLink
from omni_errors_tools.lifecycle.worker import WorkerConfig, serve_stage

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "tests"))
FRAME = omni_errors.encode(
    omni_errors.OmniErrorDetails(
        "prompt tokens must be in 0..63",
        "client",
        400,
        "BadRequestError",
        parameter="prompt",
        request_id="r-1",
        stage_id=2,
    )
)


class EchoEngine:
    """One token per step per request, `tokens` of them: a stage without torch."""

    def __init__(self, tokens: int = 100, step_delay: float = 0.01) -> None:
        self.tokens, self.delay = tokens, step_delay
        self.live: dict[str, int] = {}

    def add_request(self, request_id: str, payload: Any) -> None:
        self.live[request_id] = 0

    def abort_request(self, request_id: str) -> None:
        self.live.pop(request_id, None)

    def has_unfinished_requests(self) -> bool:
        return bool(self.live)

    def step(self) -> list[StageOutput]:
        time.sleep(self.delay)
        out = []
        for rid in list(self.live):
            self.live[rid] += 1
            done = self.live[rid] >= self.tokens
            if done:
                del self.live[rid]
            out.append(StageOutput(rid, self.live.get(rid, 0), done))
        return out

    def shutdown(self) -> None:
        self.live.clear()


# -- roles (each runs in its own process, possibly in a namespace) ------------------------------


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _link(cfg: dict[str, Any]) -> LinkConfig:
    if cfg.get("plaintext"):
        return LinkConfig(cfg["endpoint"], plaintext=True, **cfg.get("link", {}))
    k = Path(cfg["keys"])
    return LinkConfig(
        cfg["endpoint"], secret_key=k / "server.key_secret", allow=(k / "stage.key",), **cfg.get("link", {})
    )


def _connect(cfg: dict[str, Any]) -> StageConnectConfig:
    if cfg.get("plaintext"):
        return StageConnectConfig(cfg["endpoint"], plaintext=True, connect_timeout=60)
    k = Path(cfg["keys"])
    return StageConnectConfig(
        cfg["endpoint"], secret_key=k / "stage.key_secret", server_key=k / "server.key", connect_timeout=60
    )


class _Timed(Supervisor):
    lost_at: float | None = None

    def on_lost(self, *args: Any) -> None:
        self.lost_at = self.lost_at or time.time()
        super().on_lost(*args)


async def role_detect(cfg: dict[str, Any]) -> None:
    sup = _Timed(
        [RemoteStageSpec("echo", {"tokens": 100_000})],
        LifecycleConfig(startup_timeout=60),
        link=_link(cfg),
        error_factory=StageRequestError,  # the default rebuilds vLLM's exceptions: a 30 s import
    )
    await sup.start()
    answered: list[float] = []

    async def one(i: int) -> None:
        try:
            async for _ in sup.stream(sup.submit(None, request_id=f"r{i}")):
                pass
        except Exception:
            answered.append(time.time())

    tasks = [asyncio.ensure_future(one(i)) for i in range(20)]
    await asyncio.sleep(0.5)
    _emit(event="inflight")
    await asyncio.gather(*tasks)
    _emit(event="answered", lost_at=sup.lost_at, last=max(answered), n=len(answered), exit=sup.exit_code)
    await sup.wait_dead()


def role_echo_stage(cfg: dict[str, Any]) -> None:
    hello = Hello(0, "echo", secrets.token_hex(8), frame_version=(omni_errors.FRAME_MAJOR, omni_errors.FRAME_MINOR))
    link, welcome = ZmqWorkerLink.join(_connect(cfg), hello)
    spec = StageSpec(EchoEngine, welcome.kwargs, name="echo")
    sys.exit(serve_stage(0, spec, link, WorkerConfig(welcome.loop_interval, welcome.shutdown_timeout)))


class _Count:
    def __init__(self) -> None:
        self.frames, self.first, self.last = 0, 0.0, 0.0
        self.ready = asyncio.Event()

    def on_ready(self, link: Any) -> None:
        self.ready.set()

    def on_request_error(self, link: Any, details: Any) -> None:
        if not self.frames:
            self.first = time.perf_counter()
        self.frames += 1
        self.last = time.perf_counter()

    def __getattr__(self, name: str) -> Any:
        return lambda *a: None


async def role_sink(cfg: dict[str, Any]) -> None:
    from omni_errors_tools.lifecycle.remote.supervisor_side import LinkServer

    server = LinkServer(_link(cfg), LifecycleConfig())
    server.start()
    link = server.expect(0, RemoteStageSpec("echo"))
    count = _Count()
    await link.open(count)
    await count.ready.wait()
    total = cfg["frames"] // cfg["batch"] * cfg["batch"]
    while count.frames < total:
        link.poll(time.monotonic())  # heartbeats flow as in a supervisor
        await asyncio.sleep(0.05)
    _emit(frames=count.frames, seconds=count.last - count.first)
    server.close()


def role_flood(cfg: dict[str, Any]) -> None:
    link, _ = ZmqWorkerLink.join(_connect(cfg), Hello(0, "echo", secrets.token_hex(8)))
    link.ready()
    batch = [FRAME] * cfg["batch"]
    for _ in range(cfg["frames"] // cfg["batch"]):
        link.request_errors(batch)
    time.sleep(1.0)
    link.close(0)


async def role_idle(cfg: dict[str, Any]) -> None:
    n = cfg["links"]
    specs: list[Any] = (
        [StageSpec(EchoEngine, name="local")] if cfg.get("local") else [RemoteStageSpec(f"s{i}") for i in range(n)]
    )
    sup = Supervisor(specs, LifecycleConfig(startup_timeout=120), link=None if cfg.get("local") else _link(cfg))
    await sup.start()
    await asyncio.sleep(2.0)  # settle
    pids = [os.getpid(), *sup.pids]
    before = [_cpu(pid) for pid in pids]
    t0 = time.monotonic()
    await asyncio.sleep(cfg["seconds"])
    cpu = [(_cpu(pid) - b) / (time.monotonic() - t0) for pid, b in zip(pids, before, strict=True)]
    _emit(cpu=cpu[0], rss=_rss(os.getpid()), stage_cpu=cpu[1] if len(cpu) > 1 else None)
    await sup.shutdown()


def role_idle_stages(cfg: dict[str, Any]) -> None:
    """`links` idle remote stages in one process: joined, READY, heartbeating; CPU over `seconds`
    (measured here, after joining: the imports and handshakes are not idle time)."""
    links = []
    for i in range(cfg["links"]):
        link, _ = ZmqWorkerLink.join(_connect(cfg), Hello(i, f"s{i}", secrets.token_hex(8)))
        link.ready()
        links.append(link)
    time.sleep(2.0)
    _emit(cpu=_cpu_of(os.getpid(), cfg["seconds"] - 1.0) / len(links))
    time.sleep(2.0)
    for link in links:
        link.close(0)


def _cpu(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int, seconds: float) -> float:
    before = _cpu(pid)
    time.sleep(seconds)
    return (_cpu(pid) - before) / seconds


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


ROLES = {
    "detect": role_detect,
    "echo-stage": role_echo_stage,
    "sink": role_sink,
    "flood": role_flood,
    "idle": role_idle,
    "idle-stages": role_idle_stages,
}


# -- the orchestrator ----------------------------------------------------------------------------


class Hosts:
    """Where the server and the stage run: two namespaces (root) or both on loopback."""

    def __init__(self) -> None:
        self.net: Any = None
        self.addr = "127.0.0.1"
        if os.geteuid() == 0:
            from netns import NetPair, remove_stale

            remove_stale()
            self.net = NetPair.create("x")
            self.addr = self.net.addr_a

    def prefix(self, side: str) -> list[str]:
        if self.net is None:
            return []
        return list(self.net.exec(self.net.a if side == "server" else self.net.b))

    def close(self) -> None:
        if self.net is not None:
            self.net.destroy()


def _start(hosts: Hosts, side: str, role: str, cfg: dict[str, Any]) -> subprocess.Popen[str]:
    argv = [*hosts.prefix(side), sys.executable, str(HERE), "--role", role, json.dumps(cfg)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)


def _line(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError(f"{proc.args[-2]} ended without a result (exit {proc.wait()})")
    result: dict[str, Any] = json.loads(line)
    return result


def _end(*procs: subprocess.Popen[str]) -> None:
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def detection(hosts: Hosts, base: dict[str, Any], fault: str, runs: int) -> tuple[list[float], list[float]]:
    detect, answer = [], []
    for _ in range(runs):
        cfg = {**base, "endpoint": f"tcp://{hosts.addr}:{_port()}"}
        sup = _start(hosts, "server", "detect", cfg)
        stage = _start(hosts, "stage", "echo-stage", cfg)
        assert _line(sup)["event"] == "inflight"
        t0 = time.time()
        if fault == "sigkill":
            stage.send_signal(signal.SIGKILL)
        elif fault == "sigstop":
            stage.send_signal(signal.SIGSTOP)
        else:
            hosts.net.set_link(False)
        got = _line(sup)
        if fault == "sigstop":
            stage.send_signal(signal.SIGCONT)
        if fault == "link_down":
            hosts.net.set_link(True)
        detect.append(got["lost_at"] - t0)
        answer.append(got["last"] - got["lost_at"])
        stage.kill()
        _end(sup, stage)
    return detect, answer


_next_port = [6100]


def _port() -> int:
    _next_port[0] += 1
    return _next_port[0]


def throughput(hosts: Hosts, base: dict[str, Any], batch: int, frames: int, *, loopback: bool) -> float:
    where = "127.0.0.1" if loopback else hosts.addr
    cfg = {**base, "endpoint": f"tcp://{where}:{_port()}", "frames": frames, "batch": batch}
    cfg["link"] = {"timeout": 30.0, "stage_timeout": 60.0}
    side = "server" if loopback else "stage"
    sink = _start(hosts, "server", "sink", cfg)
    flood = _start(hosts, side, "flood", cfg)
    got = _line(sink)
    _end(sink, flood)
    return float(got["frames"]) / float(got["seconds"])


def pipe_throughput(batch: int, frames: int) -> float:
    """Baseline: the local link, one process writing PipeWorkerLink messages, this one decoding."""
    from omni_errors_tools.lifecycle.channels import FrameReader, Kind

    ctx = mp.get_context("spawn")
    r, w = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_pipe_writer, args=(w, batch, frames))
    proc.start()
    w.close()
    count = 0
    first = 0.0

    def on_message(kind: int, body: memoryview) -> None:
        nonlocal count, first
        if kind == Kind.REQUEST_ERROR:
            omni_errors.decode(body)
            first = first or time.perf_counter()
            count += 1

    reader = FrameReader(on_message, lambda exc: None)
    fd = r.fileno()
    while count < frames:
        data = os.read(fd, 1 << 20)
        if not data:
            break
        reader.data_received(data)
    elapsed = time.perf_counter() - first
    proc.join(30)
    return count / elapsed


def _pipe_writer(w: Any, batch: int, frames: int) -> None:
    from omni_errors_tools.lifecycle.local import PipeWorkerLink

    class _NoBoard:
        def close(self) -> None: ...

    link = PipeWorkerLink(0, w, w, _NoBoard())  # type: ignore[arg-type]
    for _ in range(frames // batch):
        link.request_errors([FRAME] * batch)


def idle(hosts: Hosts, base: dict[str, Any], links: int, seconds: float, *, local: bool = False) -> dict[str, Any]:
    cfg = {**base, "endpoint": f"tcp://{hosts.addr}:{_port()}", "links": links, "seconds": seconds, "local": local}
    sup = _start(hosts, "server", "idle", cfg)
    stages = None if local else _start(hosts, "stage", "idle-stages", cfg)
    got = _line(sup)
    if stages is not None:
        got["stage_cpu"] = _line(stages)["cpu"]
    _end(sup, *([stages] if stages else []))
    return got


def _ms(values: Sequence[float]) -> str:
    return (
        f"min {min(values) * 1e3:.0f} / median {statistics.median(values) * 1e3:.0f} / max {max(values) * 1e3:.0f} ms"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--role", choices=ROLES, help=argparse.SUPPRESS)
    p.add_argument("config", nargs="?", help=argparse.SUPPRESS)
    p.add_argument("--runs", type=int, default=5, help="repetitions of each detection case")
    p.add_argument("--frames", type=int, default=200_000, help="error frames per throughput run")
    p.add_argument("--idle", type=float, default=20.0, help="seconds of idle link for the CPU figures")
    p.add_argument("--only", default="detection,throughput,heartbeat,memory", help="comma-separated sections to run")
    args = p.parse_args()
    if args.role:
        role = ROLES[args.role]
        cfg = json.loads(args.config)
        result = role(cfg)
        if asyncio.iscoroutine(result):
            asyncio.run(result)
        return
    hosts = Hosts()
    keydir = Path(tempfile.mkdtemp(prefix="omni-bench-keys-"))
    keys.generate(keydir, "server")
    keys.generate(keydir, "stage")
    base: dict[str, Any] = {"keys": str(keydir)}
    where = "two network namespaces (veth, link-local)" if hosts.net else "loopback (not root: no namespaces)"
    print(f"remote link, CURVE, {where}; python {sys.version.split()[0]}, {os.cpu_count()} cores\n", flush=True)
    try:
        sections = set(args.only.split(","))
        for fault in ("sigkill", "sigstop", "link_down") if "detection" in sections else ():
            if fault == "link_down" and hosts.net is None:
                continue
            det, ans = detection(hosts, base, fault, args.runs)
            print(f"detection {fault:9}: stop -> lost {_ms(det)}; lost -> 20 in flight answered {_ms(ans)}", flush=True)
        for batch in (1, 16, 256) if "throughput" in sections else ():
            frames = args.frames if batch > 1 else args.frames // 4  # one message per frame: slower
            curve = throughput(hosts, base, batch, frames, loopback=False)
            plain = throughput(hosts, {**base, "plaintext": True}, batch, frames, loopback=True)
            pipe = pipe_throughput(batch, frames)
            print(
                f"throughput batch {batch:3}: CURVE {curve / 1e3:6.1f} k frames/s; baselines: plaintext loopback "
                f"{plain / 1e3:6.1f} k/s, local pipe {pipe / 1e3:6.1f} k/s",
                flush=True,
            )
        if "heartbeat" in sections:
            remote = idle(hosts, base, 1, args.idle)
            local = idle(hosts, base, 1, args.idle, local=True)
            print(
                f"heartbeat idle CPU: supervisor with 1 remote stage {remote['cpu'] * 100:.2f} % of a core, "
                f"the remote stage {remote['stage_cpu'] * 100:.2f} %; baseline, 1 local stage: "
                f"supervisor {local['cpu'] * 100:.2f} %, stage {local['stage_cpu'] * 100:.2f} %",
                flush=True,
            )
        if "memory" in sections:
            rss = {n: idle(hosts, base, n, 3.0)["rss"] for n in (1, 8, 32)}
            per_link = (rss[32] - rss[1]) / 31
            print(
                f"idle memory: supervisor RSS {rss[1] / 2**20:.1f} / {rss[8] / 2**20:.1f} / {rss[32] / 2**20:.1f} MiB "
                f"with 1 / 8 / 32 links: {per_link / 1024:.0f} KiB per idle link",
                flush=True,
            )
    finally:
        hosts.close()
        shutil.rmtree(keydir, ignore_errors=True)


if __name__ == "__main__":
    main()
