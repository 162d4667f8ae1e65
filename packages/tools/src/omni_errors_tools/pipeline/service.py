"""The pipeline as the API process sees it: three stage specs and a `Supervisor`; per request,
`submit`, then `events` (an async generator turning stage results into text tokens, audio chunks
and the end) or `collect` (all of them at once)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omni_errors_tools.lifecycle import DuplicateRequestError, LifecycleConfig, StageSpec, Supervisor
from omni_errors_tools.lifecycle.engine import RemoteStageSpec

if TYPE_CHECKING:
    from omni_errors_tools.lifecycle.remote.config import LinkConfig

__all__ = ["ENGINES", "STAGE_NAMES", "Collected", "Event", "PipelineConfig", "Service", "stage_specs"]

logger = logging.getLogger(__name__)

STAGE_NAMES = ("thinker", "talker", "code2wav")
#: Each stage's engine, named by string so that the API process never imports torch for them.
ENGINES = tuple(f"omni_errors_tools.pipeline.stages:{cls}" for cls in ("ThinkerStage", "TalkerStage", "Code2WavStage"))


@dataclass(frozen=True)
class PipelineConfig:
    step_interval: float = 0.02  # seconds per engine step: a stream a person can watch
    max_num_seqs: tuple[int, int, int] = (256, 128, 64)
    seed: int = 0
    fault: str | None = None  # process-level fault kind (see faults.py)
    fault_stage: int = 0
    fault_after: int = 0
    fault_marker: str | None = None
    remote: tuple[str, ...] = ()  # stages that run on other hosts (`omni-errors stage NAME`)


def stage_specs(cfg: PipelineConfig) -> list[StageSpec | RemoteStageSpec]:
    unknown = sorted(set(cfg.remote) - set(STAGE_NAMES))
    if unknown:
        why = f"unknown remote stage(s) {', '.join(unknown)}; the stages are {', '.join(STAGE_NAMES)}"
        raise ValueError(why)  # omni-errors: ignore[OE101]: a bad --remote-stage: a usage error
    specs: list[StageSpec | RemoteStageSpec] = []
    for stage_id, (name, engine) in enumerate(zip(STAGE_NAMES, ENGINES, strict=True)):
        kwargs: dict[str, Any] = {
            "seed": cfg.seed,
            "max_num_seqs": cfg.max_num_seqs[stage_id],
            "step_interval": cfg.step_interval,
            "fault_marker": cfg.fault_marker,
        }
        if cfg.fault is not None and cfg.fault_stage == stage_id:
            kwargs.update(fault=cfg.fault, fault_after=cfg.fault_after)
        if name in cfg.remote:  # the remote host runs the engine; these arguments travel to it
            specs.append(RemoteStageSpec(name, kwargs, emit=stage_id != 1))
        else:
            specs.append(StageSpec(engine, kwargs, name=name, emit=stage_id != 1))
    return specs


@dataclass(frozen=True)
class Event:
    kind: str  # "token" | "audio" | "done"
    token: int = 0
    pcm: bytes = b""
    finish_reason: str = "stop"
    completion_tokens: int = 0


@dataclass(frozen=True)
class Collected:
    """A whole request's result, for the transports that answer once: text tokens, PCM, finish reason."""

    tokens: list[int]
    pcm: bytes
    finish_reason: str


class Service:
    def __init__(self, pipeline: PipelineConfig, lifecycle: LifecycleConfig, link: LinkConfig | None = None) -> None:
        self.pipeline = pipeline
        self.supervisor = Supervisor(stage_specs(pipeline), lifecycle, link=link)

    def submit(self, payload: dict[str, Any], request_id: str) -> str:
        """Send the request to stage 0 now (so a dead pipeline is an HTTP error, before any byte)."""
        try:
            return self.supervisor.submit(payload, request_id=request_id)
        except DuplicateRequestError:
            from omni_errors.semantics.exceptions import OmniConflictError

            raise OmniConflictError("a request with this id is already in flight") from None

    async def events(self, request_id: str) -> AsyncIterator[Event]:
        """The request's events; raises the request's semantic exception if it fails."""
        done = False
        finish_reason, count = "stop", 0
        try:
            async for result in self.supervisor.stream(request_id):
                if result.stage_id == 0:
                    if result.finished:
                        finish_reason, count = result.payload["finish_reason"], len(result.payload["tokens"])
                    else:
                        yield Event("token", token=result.payload)
                elif result.stage_id == 2 and result.payload["pcm"]:
                    yield Event("audio", pcm=result.payload["pcm"])
            done = True
            yield Event("done", finish_reason=finish_reason, completion_tokens=count)
        finally:
            if not done:  # the client went away (or the request failed): free its slot in the stages
                self.supervisor.abort(request_id)

    async def collect(self, request_id: str) -> Collected:
        """Every event of the request, gathered; raises the request's semantic exception if it fails."""
        tokens: list[int] = []
        pcm: list[bytes] = []
        finish_reason = "stop"
        async for ev in self.events(request_id):
            if ev.kind == "token":
                tokens.append(ev.token)
            elif ev.kind == "audio":
                pcm.append(ev.pcm)
            else:
                finish_reason = ev.finish_reason
        return Collected(tokens, b"".join(pcm), finish_reason)
