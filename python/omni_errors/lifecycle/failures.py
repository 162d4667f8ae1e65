"""Which failures end a stage, and the records the lifecycle itself creates.

Fatal-by-type detection looks the classes up in `sys.modules` instead of importing them: an
exception of a class can only exist once its module is loaded, so this costs nothing in a stage
that never imported inductor or vLLM (a stage process imports torch only, never vLLM: 15 s).
The exception and its `__cause__`/`__context__` chain are searched, so an OOM wrapped in a
RuntimeError by a library (seed 003) is still an OOM. Messages are never inspected.
"""

from __future__ import annotations

import sys

from omni_errors import OmniErrorDetails
from omni_errors.lifecycle.exitcodes import ExitCode

__all__ = [
    "classify_failure",
    "fatal_cause",
    "lifecycle_error",
]

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
    """The record for `exc` (through `omni_errors.classify` when present); `fatal` forces a fatal 5xx."""
    try:
        from omni_errors.classify import classify  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        classify = _fallback_classify
    try:
        details: OmniErrorDetails = classify(exc, request_id=request_id, stage_id=stage_id)
    except Exception:  # the classifier must never turn a failure into a second failure
        details = _fallback_classify(exc, request_id=request_id, stage_id=stage_id)
    if details.stage_id is None:
        details = details.replace(stage_id=stage_id)
    if fatal and not details.fatal:
        if details.category != "server":
            details = details.replace(category="server", status_code=500)
        details = details.replace(fatal=True)
    return details


def _fallback_classify(exc: BaseException, *, request_id: str | None, stage_id: int | None) -> OmniErrorDetails:
    """Used only until `omni_errors.classify` exists: unknown exceptions are server 500."""
    fatal = fatal_cause(exc) is not None
    name = type(exc).__name__
    return OmniErrorDetails(
        str(exc) or name,
        "server",
        500,
        name if name.isidentifier() else "InternalServerError",
        request_id=request_id,
        stage_id=stage_id,
        fatal=fatal,
    )


def lifecycle_error(
    kind: str, message: str, *, stage_id: int | None, request_id: str | None = None
) -> OmniErrorDetails:
    """Records the lifecycle creates itself: `dead` (fatal 500), `timeout` (504), `unavailable` (503)."""
    if kind == "dead":
        return OmniErrorDetails(
            message, "server", 500, "OmniEngineDeadError", request_id=request_id, stage_id=stage_id, fatal=True
        )
    if kind == "timeout":
        return OmniErrorDetails(
            message, "server", 504, "OmniStageTimeoutError", request_id=request_id, stage_id=stage_id
        )
    if kind == "unavailable":
        return OmniErrorDetails(
            message, "server", 503, "OmniServiceUnavailableError", request_id=request_id, stage_id=stage_id
        )
    raise ValueError(f"unknown lifecycle error kind {kind!r}; expected 'dead', 'timeout' or 'unavailable'")
