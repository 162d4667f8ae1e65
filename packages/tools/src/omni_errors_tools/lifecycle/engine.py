"""The protocol a stage engine implements, and how a stage is described to the supervisor.

An engine is built inside its stage process by calling `StageSpec.engine(**StageSpec.kwargs)`
(the engine may also be named as `"module:Name"`),
so the spec holds only picklable, importable things (a class or module-level function and plain
arguments). The worker drives it as vLLM's EngineCore busy loop does: add/abort requests, `step()`
while work is pending, `shutdown()` once at the end.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, runtime_checkable

__all__ = ["RemoteStageSpec", "RequestFailure", "StageEngine", "StageOutput", "StageSpec"]


class StageOutput(NamedTuple):
    """One piece of a request's result; `finished` marks the last one from this stage.

    A finished output's payload is what the next stage receives as its request payload.
    """

    request_id: str
    payload: Any
    finished: bool = False


class RequestFailure(NamedTuple):
    """A failure that belongs to one request: the stage answers it and keeps serving.

    If the exception is fatal by type (OOM, EngineDeadError, InductorError) the stage still dies.
    """

    request_id: str
    error: BaseException


@runtime_checkable
class StageEngine(Protocol):
    """What a stage process runs. Exceptions from `step()` are fatal for the stage; exceptions from
    `add_request` and `RequestFailure` items are per-request unless fatal by type."""

    def add_request(self, request_id: str, payload: Any) -> None: ...

    def abort_request(self, request_id: str) -> None: ...

    def has_unfinished_requests(self) -> bool: ...

    def step(self) -> Sequence[StageOutput | RequestFailure]: ...

    def shutdown(self) -> None: ...


@dataclass(frozen=True)
class StageSpec:
    """A stage: the engine factory and its arguments, resolved in the child.

    `emit=False` keeps this stage's outputs internal (only forwarded to the next stage).
    """

    engine: Callable[..., StageEngine] | str  # a callable, or "package.module:Name" imported in the child
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    emit: bool = True

    def resolve(self) -> Callable[..., StageEngine]:
        """The engine factory, importing its module if it is named by string."""
        factory = self.engine
        if isinstance(factory, str):
            # A string keeps the supervisor from importing the engine's module (torch, seconds).
            module, _, name = factory.partition(":")
            factory = getattr(importlib.import_module(module), name)
        return factory

    def build(self) -> StageEngine:
        return self.resolve()(**dict(self.kwargs))


@dataclass(frozen=True)
class RemoteStageSpec:
    """A stage that runs on another host and joins over the link (`omni_errors_tools.lifecycle.remote`).

    The remote host chooses the engine (the network never names code to import); `kwargs` are
    plain data (msgpack) sent to it when it joins, so the pipeline is configured in one place.
    """

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    emit: bool = True
