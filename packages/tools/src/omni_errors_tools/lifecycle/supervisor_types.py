"""Public types of the supervisor's API: configuration, results, health, errors."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from omni_errors import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.lifecycle.state import State
from omni_errors_tools.lifecycle.worker import WorkerConfig

__all__ = [
    "DuplicateRequestError",
    "Health",
    "LifecycleConfig",
    "StageRequestError",
    "StageResult",
    "StageStartupError",
    "default_error_factory",
]


@dataclass(frozen=True)
class LifecycleConfig:
    """Every wait has a deadline; these are the defaults (seconds). See docs/lifecycle.md."""

    startup_timeout: float = 600.0  # engine construction + torch.compile can take minutes
    heartbeat_interval: float = 0.2  # a stage's longest idle wait
    heartbeat_timeout: float = 30.0  # no heartbeat this long: in-flight requests at the stage get 504
    hang_grace: float = 10.0  # still no heartbeat this much later: the stage is dead (fatal)
    request_timeout: float | None = 1800.0  # per-request deadline (504); long audio/video jobs fit; None = none
    shutdown_timeout: float = 2.0  # the engine's shutdown() inside a stage
    stop_timeout: float = 3.0  # SIGTERM to SIGKILL; > shutdown_timeout so a stage can clean up
    drain_timeout: float = 10.0  # on SIGTERM, how long in-flight requests may finish
    watchdog_interval: float = 0.1
    max_inflight: int = 4096  # requests in the pipeline at once; more get 503 (bounds every queue)
    shm_prefix: str = "omni_lc_"

    def worker(self) -> WorkerConfig:
        return WorkerConfig(heartbeat_interval=self.heartbeat_interval, shutdown_timeout=self.shutdown_timeout)


@dataclass(frozen=True)
class StageResult:
    request_id: str
    stage_id: int
    payload: Any
    finished: bool


@dataclass(frozen=True)
class Health:
    ok: bool
    status_code: int  # 200 or 503, what /health should answer
    state: State  # a str enum: its value is what /health reports
    error: OmniErrorDetails | None = None


class StageRequestError(Exception):
    """A request's failure, carrying its canonical record as `.details`."""

    def __init__(self, details: OmniErrorDetails) -> None:
        super().__init__(f"{details.error_type} ({details.status_code}): {details.message}")
        self.details = details


class DuplicateRequestError(ValueError):
    """`submit()` got a request id that is still in flight; `request_id` names it.

    A `ValueError` for callers written against the untyped error; map it by type (a server answers 409).
    """

    def __init__(self, request_id: str) -> None:
        super().__init__(f"request id {request_id!r} is already in flight")
        self.request_id = request_id


class StageStartupError(RuntimeError):
    """A stage failed to start; `.details` is the root cause reported by the child (sanitized)."""

    exit_code = ExitCode.STARTUP_FAILURE

    def __init__(self, details: OmniErrorDetails, reason: str | None = None) -> None:
        super().__init__(f"stage {details.stage_id} failed to start: {reason or details.message}")
        self.details = details
        self.reason = reason or details.message


def default_error_factory(details: OmniErrorDetails) -> BaseException:
    """`omni_errors.rebuild` where vLLM is installed (the semantic exception), else StageRequestError."""
    try:
        from omni_errors.semantics.exceptions import rebuild  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return StageRequestError(details)
    exc: BaseException = rebuild(details)
    if not hasattr(exc, "details"):
        with contextlib.suppress(AttributeError):
            exc.details = details  # type: ignore[attr-defined]
    return exc
