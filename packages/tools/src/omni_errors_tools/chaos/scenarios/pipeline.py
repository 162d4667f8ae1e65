"""The reference pipeline's scenarios (`omni-errors serve`, target `pipeline`).

Faults are `serve`'s own flags (`--fault KIND --fault-stage S --fault-after N`) or per-request
`X-Omni-Fault` headers on a server started with `--allow-request-faults` (`omni_errors_tools.pipeline.faults`).
"""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from typing import Any

from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.chaos.loadgen import Outcome, http_call, sse_call, ws_call
from omni_errors_tools.chaos.scenario import Call, Ctx, Expect, Load, Scenario, expect
from omni_errors_tools.chaos.target import Launch, ServerCommand
from omni_errors_tools.pipeline.defaults import DEFAULT_MODEL

__all__ = ["PIPELINE", "SCENARIOS", "SECRET", "ServeTarget", "serve_listener", "streams"]

SECRET = "sk-proj-Zq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0d"  # a rejected value: must never be echoed


@dataclass(frozen=True)
class ServeTarget:
    """`python -m omni_errors_tools.pipeline serve`: three torch stage processes behind the OpenAI-style API."""

    name: str = "pipeline"
    health_path: str = "/health"

    def command(self, launch: Launch) -> ServerCommand:
        listen, fds = serve_listener(launch)
        return ServerCommand(
            [launch.python, "-m", "omni_errors_tools.pipeline", "serve", *listen,
             "--fault-marker", str(launch.fault_marker), "--step-interval", str(launch.step_interval),
             "--startup-timeout", str(launch.startup_timeout), *launch.args],
            pass_fds=fds,
        )  # fmt: skip


def serve_listener(launch: Launch) -> tuple[list[str], tuple[int, ...]]:
    """`serve`'s flags for where it listens, and the descriptors it inherits for them: the harness's
    bound socket (`--fd`) when there is one, else `--host`/`--port`."""
    if launch.listen_fd is None:
        return ["--host", launch.host, "--port", str(launch.port)], ()
    return ["--fd", str(launch.listen_fd)], (launch.listen_fd,)


PIPELINE = ServeTarget()


def _chat(i: int, *, max_tokens: int, audio: bool, stream: bool = True) -> dict[str, Any]:
    return {
        "model": DEFAULT_MODEL,
        "messages": [{"role": "user", "content": f"request {i}: tell me a story"}],
        "max_tokens": max_tokens,
        "stream": stream,
        "modalities": ["text", "audio"] if audio else ["text"],
        "seed": i,
    }


def streams(n_full: int, max_tokens: int, ok_or: Expect, fault_header: str | None = None) -> Load:
    """n concurrent streaming chats with audio; the first carries `fault_header` (a per-request fault)."""

    def load(ctx: Ctx) -> list[tuple[Call, Expect]]:
        def call(i: int) -> Call:
            headers = {"X-Omni-Fault": fault_header} if fault_header and i == 0 else None
            body = _chat(i, max_tokens=max_tokens, audio=True)
            return lambda: sse_call(ctx.host, ctx.port, "/v1/chat/completions", body, headers=headers, t0=ctx.t0)

        return [(call(i), ok_or) for i in range(ctx.n(n_full))]

    return load


def _mixed(ctx: Ctx) -> list[tuple[Call, Expect]]:
    """Client errors on every transport, a non-fatal stage error, and good requests in between."""
    h, p = ctx.host, ctx.port
    good = _chat(0, max_tokens=8, audio=False)
    chat = "/v1/chat/completions"
    audio = {"type": "input_audio", "input_audio": {"data": "bm90IGEgd2F2", "format": "wav"}}  # not a WAV
    bad_audio = [{"role": "user", "content": [audio]}]
    cases: list[tuple[Call, Expect]] = [
        (lambda: sse_call(h, p, chat, {**good, "model": SECRET}, t0=ctx.t0), expect(("error", 404, None))),
        (
            lambda: http_call(h, p, "POST", chat, {**good, "stream": False, "max_tokens": 0}, t0=ctx.t0),
            expect(("error", 400, None)),
        ),
        (
            lambda: http_call(h, p, "POST", chat, {"model": DEFAULT_MODEL, "messages": "hi"}, t0=ctx.t0),
            expect(("error", 400, None)),
        ),
        (
            lambda: http_call(h, p, "POST", chat, {**good, "stream": False, "messages": bad_audio}, t0=ctx.t0),
            expect(("error", 422, None)),
        ),
        (
            lambda: http_call(
                h, p, "POST", "/v1/audio/speech", {"model": DEFAULT_MODEL, "input": "hi", "voice": "nobody"}, t0=ctx.t0
            ),
            expect(("error", 400, None)),  # an unknown voice is a bad parameter, as OpenAI answers it
        ),
        (
            lambda: http_call(
                h,
                p,
                "POST",
                "/v1/audio/speech",
                {"model": DEFAULT_MODEL, "input": "hi", "response_format": "mp3"},
                t0=ctx.t0,
            ),
            expect(("error", 400, None)),
        ),
        (lambda: http_call(h, p, "GET", "/v1/jobs/job-missing", t0=ctx.t0), expect(("error", 404, None))),
        (lambda: _job_conflict(ctx), expect(("error", 409, None))),
        (
            lambda: sse_call(h, p, chat, good, headers={"X-Omni-Fault": "validation"}, t0=ctx.t0),
            expect(("error", 400, None)),
        ),
        (
            lambda: sse_call(h, p, chat, good, headers={"X-Omni-Fault": "stage_error;stage=0;after=2"}, t0=ctx.t0),
            expect(("error", 500, 0)),
        ),
        (
            lambda: ws_call(h, p, "/v1/chat/ws", {**good, "max_tokens": 10_000}, t0=ctx.t0),
            expect(("error", 400, None)),
        ),
        (lambda: ws_call(h, p, "/v1/chat/ws", "{not json", t0=ctx.t0), expect(("error", 400, None))),
        (lambda: ws_call(h, p, "/v1/chat/ws", good, t0=ctx.t0), expect(("ok", 200, None))),
        (lambda: sse_call(h, p, chat, good, t0=ctx.t0), expect(("ok", 200, None))),
        (lambda: http_call(h, p, "POST", chat, {**good, "stream": False}, t0=ctx.t0), expect(("ok", 200, None))),
    ]
    return [cases[i % len(cases)] for i in range(ctx.n(300))]


async def _job_conflict(ctx: Ctx) -> Outcome:
    """A job id used twice: the second create is 409 (the first is running or done)."""
    job_id = f"job-{os.urandom(6).hex()}"
    body = {"model": DEFAULT_MODEL, "input": "a job that takes a while to speak", "id": job_id}
    first = await http_call(ctx.host, ctx.port, "POST", "/v1/jobs", body, t0=ctx.t0)
    if first.result != "ok":
        return first
    return await http_call(ctx.host, ctx.port, "POST", "/v1/jobs", body, t0=ctx.t0)


def _fault(kind: str, stage: int, after: int | None = None) -> list[str]:
    args = ["--fault", kind, "--fault-stage", str(stage)]
    return args if after is None else [*args, "--fault-after", str(after)]


SCENARIOS = [
    Scenario(
        "pr-fatal",
        "vLLM PR: 1000 concurrent streams, fatal error in stage 1 after 200 engine steps",
        PIPELINE,
        lambda c: _fault("fatal", 1, max(5, round(200 * c.scale))),
        ExitCode.FATAL_ENGINE,
        streams(1000, 48, expect(("ok", 200, None), ("error", 500, 1))),
    ),
    Scenario(
        "oom-last",
        "typed OOM (torch.OutOfMemoryError) in the last stage (code2wav)",
        PIPELINE,
        lambda c: _fault("oom", 2, 3),
        ExitCode.OOM,
        streams(200, 16, expect(("ok", 200, None), ("error", 500, 2))),
    ),
    Scenario(
        "inductor-request",
        "one request asks for an InductorError in the thinker (per-request fault) among 100 streams",
        PIPELINE,
        lambda c: ["--allow-request-faults"],
        ExitCode.FATAL_ENGINE,
        streams(100, 32, expect(("ok", 200, None), ("error", 500, 0)), fault_header="inductor;stage=0;after=5"),
    ),
    Scenario(
        "startup",
        "a stage fails to start (talker's constructor raises)",
        PIPELINE,
        lambda c: _fault("startup", 1),
        ExitCode.STARTUP_FAILURE,
        starts=False,
    ),
    Scenario(
        "sigkill",
        "SIGKILL of the thinker process mid-load",
        PIPELINE,
        lambda c: _fault("sigkill", 0, 10),
        ExitCode.STAGE_LOST,
        streams(200, 32, expect(("ok", 200, None), ("error", 500, 0))),
    ),
    Scenario(
        "hang-sigint",
        "the talker hangs (a stuck kernel), then the operator presses Ctrl+C",
        PIPELINE,
        lambda c: _fault("hang", 1, 10),
        ExitCode.SIGINT,
        streams(200, 32, expect(("ok", 200, None), ("error", 503, None), ("error", 503, 1))),
        sigint_after_fault=1.5,
    ),
    Scenario(
        "client-errors",
        "mixed client errors on every transport; the server must stay healthy (then SIGTERM)",
        PIPELINE,
        lambda c: ["--allow-request-faults"],
        ExitCode.SIGTERM,
        _mixed,
        stop_after_load=signal.SIGTERM,
    ),
]
