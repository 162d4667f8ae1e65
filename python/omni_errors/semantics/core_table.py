"""The vLLM-free core of the classification table, and the records the lifecycle builds itself.

Rows: torch's fatal types (looked up lazily, never imported), omni_errors' own errors, a raw
`TimeoutError` at a stage deadline, vLLM's raw-type migration fallbacks, and the safety net. A
stage process without vLLM classifies with `classify_core`; `omni_errors.semantics.classification.classify`
is this table extended with vLLM's hierarchy and the Omni types, so the two agree on everything
the core knows.

`FATAL`, `TIMEOUT`, `UNAVAILABLE` and `STAGE_FAILED` describe the records the lifecycle and the
plugin create without an exception (`fatal_record`, `timeout_record`, `unavailable_record`,
`stage_failure_record`); the Omni exception rows of the full table are built from the same rules,
so each record is described once.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace

from omni_errors._native import OmniErrorDetails
from omni_errors.errors import OmniErrorsError
from omni_errors.semantics.rules import LazyClass, Rule, RuleTable

__all__ = [
    "CORE",
    "DEAD_MESSAGE",
    "FATAL",
    "INDUCTOR_ERROR",
    "OUT_OF_MEMORY",
    "STAGE_FAILED",
    "TIMEOUT",
    "UNAVAILABLE",
    "classify_core",
    "fatal_record",
    "replica_lost_record",
    "stage_failure_record",
    "timeout_record",
    "unavailable_record",
]

#: vLLM's `EngineDeadError.CLIENT_MESSAGE`, the public text of every fatal record (a test checks
#: it against vLLM's; the core cannot import vLLM to read it).
DEAD_MESSAGE = "The server had an error while processing your request."

FATAL = Rule("server", 500, "InternalServerError", public_message=DEAD_MESSAGE, fatal=True, summary="Fatal failure")
TIMEOUT = Rule("server", 504, "GatewayTimeoutError", summary="A deadline expired")
UNAVAILABLE = Rule("server", 503, "ServiceUnavailableError", summary="Unavailable")
#: A stage said a request failed but not why (an error output or message with neither text nor
#: status): the generic server failure, never a guess at the client's fault.
STAGE_FAILED = Rule(
    "server",
    500,
    "InternalServerError",
    public_message="Stage request failed",
    summary="Stage failure without a reason",
)

#: `torch.OutOfMemoryError` (`torch.cuda.OutOfMemoryError` is the same class).
OUT_OF_MEMORY = LazyClass("torch", "OutOfMemoryError")
INDUCTOR_ERROR = LazyClass("torch._inductor.exc", "InductorError")

_BAD, _ISE = "BadRequestError", "InternalServerError"

# fmt: off
CORE = RuleTable([
    # Fatal device and compiler failures, recognised by type, never by message text.
    (OUT_OF_MEMORY, replace(FATAL, summary="Device out of memory (also torch.cuda.OutOfMemoryError)")),
    (INDUCTOR_ERROR, replace(FATAL, summary="torch.compile / Inductor failure")),
    # omni_errors' own errors are internal even though they derive from ValueError.
    (OmniErrorsError, Rule("server", 500, _ISE, summary="omni_errors' own error (codec, record)")),
    (asyncio.TimeoutError, replace(TIMEOUT, stage_deadline=True,
                                   summary="A wait on a stage expired (only with a stage_id; otherwise 500)")),
    # vLLM's migration fallbacks for raw types, applied while `raw_fallbacks` is on.
    (ValueError, Rule("client", 400, _BAD, raw_fallback=True, summary="Raw ValueError (fallback; off: 500)")),
    (TypeError, Rule("client", 400, _BAD, raw_fallback=True, summary="Raw TypeError (fallback; off: 500)")),
    (OverflowError, Rule("client", 400, _BAD, raw_fallback=True, summary="Raw OverflowError (fallback; off: 500)")),
    (NotImplementedError, Rule("server", 501, "NotImplementedError", raw_fallback=True,
                               summary="Raw NotImplementedError (fallback; off: 500)")),
    # The safety net.
    (BaseException, Rule("server", 500, _ISE, summary="Anything else")),
])
# fmt: on


def classify_core(
    exc: BaseException, *, request_id: str | None = None, stage_id: int | None = None, raw_fallbacks: bool = True
) -> OmniErrorDetails:
    """The record of `exc` by the core table alone: for processes that never import vLLM."""
    return CORE.classify(exc, request_id=request_id, stage_id=stage_id, raw_fallbacks=raw_fallbacks)


def fatal_record(
    *, stage_id: int | None, request_id: str | None = None, root_cause: str | None = None
) -> OmniErrorDetails:
    """The canonical fatal record (server 500, fatal, public text `DEAD_MESSAGE`).

    `root_cause` replaces the public text only where no client reads it: a startup failure, which
    the supervisor raises as `StageStartupError` before anything is served.
    """
    return FATAL.record(root_cause or DEAD_MESSAGE, request_id=request_id, stage_id=stage_id)


def stage_failure_record(
    *, stage_id: int | None, request_id: str | None = None, message: str | None = None
) -> OmniErrorDetails:
    """The generic stage failure (server 500, not fatal): a stage said a request failed but not why,
    or (`message`) the pipeline itself failed the request for a reason of its own."""
    assert STAGE_FAILED.public_message is not None
    return STAGE_FAILED.record(message or STAGE_FAILED.public_message, request_id=request_id, stage_id=stage_id)


def timeout_record(message: str, *, stage_id: int | None, request_id: str | None = None) -> OmniErrorDetails:
    """A deadline expired (server 504, as `OmniStageTimeoutError` classifies), `message` its public text."""
    return TIMEOUT.record(message, request_id=request_id, stage_id=stage_id)


def unavailable_record(message: str, *, stage_id: int | None, request_id: str | None = None) -> OmniErrorDetails:
    """Not serving now (server 503, as `OmniServiceUnavailableError` classifies), `message` its public text."""
    return UNAVAILABLE.record(message, request_id=request_id, stage_id=stage_id)


def replica_lost_record(*, stage_id: int | None, request_id: str | None = None) -> OmniErrorDetails:
    """A request of a replica that died while its stage has another: 503, not fatal (the pipeline
    serves on, and another replica takes the request if the client sends it again)."""
    return unavailable_record(
        f"Stage {stage_id} lost the replica serving this request; another replica serves on: retry the request",
        stage_id=stage_id,
        request_id=request_id,
    )
