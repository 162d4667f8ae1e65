"""Which failures end a stage, and the records the lifecycle itself creates.

Fatal-by-type detection looks the classes up in `sys.modules` instead of importing them: an
exception of a class can only exist once its module is loaded, so this costs nothing in a stage
that never imported inductor or vLLM (a stage process imports torch only, never vLLM: 15 s).
The exception and its `__cause__`/`__context__` chain are searched, so an OOM wrapped in a
RuntimeError by a library (seed 003) is still an OOM. Messages are never inspected.

`omni_errors.classify` imports vLLM, torch, fastapi and inductor (15-60 s on these machines), so a
stage uses it only when vLLM is already loaded there (a real vLLM stage pays nothing more); a
torch-only stage uses `light_classify`, which gives the same record as the table for everything
such a stage can raise (checked against `classify` by tests/lifecycle/test_lifecycle_classify.py).
"""

from __future__ import annotations

import sys

from omni_errors import OmniErrorDetails
from omni_errors._status import phrase
from omni_errors.errors import OmniErrorsError
from omni_errors.lifecycle.exitcodes import ExitCode

__all__ = [
    "DEAD_MESSAGE",
    "classify_failure",
    "fatal_cause",
    "lifecycle_error",
    "light_classify",
]

#: vLLM's `EngineDeadError.CLIENT_MESSAGE`: the public text of every fatal record (drift-tested).
DEAD_MESSAGE = "The server had an error while processing your request."

_CHAIN_DEPTH = 8


def _fatal_classes() -> list[tuple[type[BaseException], ExitCode]]:
    found: list[tuple[type[BaseException], ExitCode]] = []
    torch = sys.modules.get("torch")
    cuda = getattr(torch, "cuda", None)
    for cls in (getattr(torch, "OutOfMemoryError", None), getattr(cuda, "OutOfMemoryError", None)):
        if isinstance(cls, type):
            found.append((cls, ExitCode.OOM))
    inductor = sys.modules.get("torch._inductor.exc")
    if isinstance(getattr(inductor, "InductorError", None), type):
        found.append((inductor.InductorError, ExitCode.FATAL_ENGINE))  # type: ignore[union-attr]
    for module in ("vllm.v1.engine.exceptions", "vllm.v1.engine"):
        cls = getattr(sys.modules.get(module), "EngineDeadError", None)
        if isinstance(cls, type):
            found.append((cls, ExitCode.FATAL_ENGINE))
    return found


def fatal_cause(exc: BaseException) -> tuple[BaseException, ExitCode] | None:
    """The first exception in `exc`'s chain that is fatal by type, with the exit code it implies.

    OOM anywhere in the chain wins over the other fatal types (its exit code is more specific).
    """
    classes = _fatal_classes()
    if not classes:
        return None
    hit: tuple[BaseException, ExitCode] | None = None
    seen: set[int] = set()
    cur: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if cur is None or id(cur) in seen:
            break
        seen.add(id(cur))
        for cls, code in classes:
            if isinstance(cur, cls):
                if code is ExitCode.OOM:
                    return cur, code
                hit = hit or (cur, code)
        cur = cur.__cause__ or cur.__context__
    return hit


def classify_failure(
    exc: BaseException, *, request_id: str | None, stage_id: int, fatal: bool = False
) -> OmniErrorDetails:
    """The record for `exc` in a stage; `fatal=True` forces the canonical fatal 500."""
    details: OmniErrorDetails | None = None
    if "vllm" in sys.modules:  # only then is the full table free to load here
        try:
            from omni_errors.classify import classify

            details = classify(exc, request_id=request_id, stage_id=stage_id)
        except Exception:  # the classifier must never turn a failure into a second failure
            details = None
    if details is None:
        details = light_classify(exc, request_id=request_id, stage_id=stage_id)
    if details.stage_id is None:
        details = details.replace(stage_id=stage_id)
    if fatal and not (details.fatal and details.category == "server"):
        details = lifecycle_error("dead", DEAD_MESSAGE, stage_id=stage_id, request_id=request_id)
    return details


def light_classify(
    exc: BaseException, *, request_id: str | None, stage_id: int | None, raw_fallbacks: bool = True
) -> OmniErrorDetails:
    """`classify` for a stage without vLLM: the table's rows for what a torch-only stage can raise.

    Fatal types -> fatal 500 with `DEAD_MESSAGE`; `omni_errors` errors -> 500; `TimeoutError` with a
    stage -> 504; vLLM's raw fallbacks while on (the default, as in `classify`): ValueError/TypeError/
    OverflowError -> 400, NotImplementedError -> 501; anything else -> 500. The message is the first
    argument when it is a string, else `str(exc)`, else the status phrase.
    """
    cause = fatal_cause(exc)
    if cause is not None and cause[0] is exc:  # the table looks at the exception itself, not its chain
        return OmniErrorDetails(
            DEAD_MESSAGE, "server", 500, "InternalServerError", request_id=request_id, stage_id=stage_id, fatal=True
        )
    category, status, error_type = _light_row(exc, raw_fallbacks=raw_fallbacks, stage_known=stage_id is not None)
    message = exc.args[0] if exc.args and isinstance(exc.args[0], str) else str(exc)
    message = message if message.strip() else phrase(status)
    try:
        return OmniErrorDetails(message, category, status, error_type, request_id=request_id, stage_id=stage_id)
    except ValueError:  # a field over its limit: drop the optional ones rather than fail the error path
        return OmniErrorDetails(message, category, status, error_type, stage_id=stage_id)


def _light_row(exc: BaseException, *, raw_fallbacks: bool, stage_known: bool) -> tuple[str, int, str]:
    if isinstance(exc, OmniErrorsError):  # derives from ValueError, but is internal
        return "server", 500, "InternalServerError"
    if isinstance(exc, TimeoutError) and stage_known:
        return "server", 504, "GatewayTimeoutError"
    if raw_fallbacks:
        if isinstance(exc, (ValueError, TypeError, OverflowError)):
            return "client", 400, "BadRequestError"
        if isinstance(exc, NotImplementedError):
            return "server", 501, "NotImplementedError"
    return "server", 500, "InternalServerError"


def lifecycle_error(
    kind: str, message: str, *, stage_id: int | None, request_id: str | None = None
) -> OmniErrorDetails:
    """Records the lifecycle creates itself, as `classify` renders the matching Omni exception:
    `dead` (OmniEngineDeadError: fatal 500, public text DEAD_MESSAGE; `message` goes to the logs),
    `timeout` (OmniStageTimeoutError, 504) and `unavailable` (OmniServiceUnavailableError, 503)."""
    if kind == "dead":
        return OmniErrorDetails(
            DEAD_MESSAGE, "server", 500, "InternalServerError", request_id=request_id, stage_id=stage_id, fatal=True
        )
    if kind == "timeout":
        return OmniErrorDetails(message, "server", 504, "GatewayTimeoutError", request_id=request_id, stage_id=stage_id)
    if kind == "unavailable":
        return OmniErrorDetails(
            message, "server", 503, "ServiceUnavailableError", request_id=request_id, stage_id=stage_id
        )
    raise ValueError(f"unknown lifecycle error kind {kind!r}; expected 'dead', 'timeout' or 'unavailable'")
