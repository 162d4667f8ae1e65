"""The one report path: classify -> count -> log -> render, whatever the transport.

Every place an error leaves the process calls `report(failure, render, where=...)`: the HTTP
exception handler and the WebSocket safety net (`omni_errors.server`), `sse_guard` and
`websocket_errors` (`omni_errors.render`), async jobs when their failure is stored, and so the
reference server's streams. `render` is the transport's own last step (a response, a terminal SSE
event, a close frame, a stored job); whatever it returns, `report` returns.

Logging says what happened once per cause. A client error is one INFO line. A server error raised
in this process is one ERROR line with its traceback. A failure that carries its record (`.details`:
rebuilt from a stage's frame, or a record given as is) was logged where the record was made: a stage
logs a fatal failure with its traceback once, and each request that then meets the dead pipeline
logs one WARNING line here, not the traceback again.

Importing this module imports nothing heavy; the classifier and the counter load on first use.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TypeVar

from omni_errors._native import OmniErrorDetails

__all__ = ["FatalHook", "report"]

R = TypeVar("R")
FatalHook = Callable[[OmniErrorDetails], None]

_log = logging.getLogger(__name__)


def report(
    failure: BaseException | OmniErrorDetails,
    render: Callable[[OmniErrorDetails], R],
    *,
    where: str,
    request_id: str | None = None,
    stage_id: int | None = None,
    raw_fallbacks: bool = True,
    on_fatal: FatalHook | None = None,
) -> R:
    """Classify `failure`, count it, log it, call `on_fatal` if fatal, and return `render(details)`.

    Args:
        failure: the exception, or a record already made (stored as is).
        render: the transport's rendering of the record (may return an awaitable: the caller awaits).
        where: what failed, for the log line (`POST /v1/chat/completions`, `stream chatcmpl-1`, `job j1`).
        request_id: the request, if known (an exception's own record keeps its id).
        stage_id: the stage, if known; also marks a raw timeout as a stage deadline (504).
        raw_fallbacks: vLLM's migration fallback for raw `ValueError`/`TypeError`/`OverflowError`
            (400) and `NotImplementedError` (501) at this boundary; off, they are 500.
        on_fatal: called with a fatal record, after it is counted and before it is rendered.
    """
    from omni_errors.semantics.metrics import observe

    if isinstance(failure, OmniErrorDetails):
        details = failure
    else:
        from omni_errors.semantics.classification import classify

        details = classify(failure, request_id=request_id, stage_id=stage_id, raw_fallbacks=raw_fallbacks)
    observe(details)
    _log_once(failure, details, where)
    if details.fatal and on_fatal is not None:
        on_fatal(details)
    return render(details)


def _log_once(failure: BaseException | OmniErrorDetails, details: OmniErrorDetails, where: str) -> None:
    stage = "" if details.stage_id is None else f" (stage {details.stage_id})"
    args = (where, details.status_code, details.error_type, stage)
    if details.category == "client":
        _log.info("%s -> %d %s%s", *args)
    elif isinstance(failure, BaseException) and not isinstance(getattr(failure, "details", None), OmniErrorDetails):
        _log.error("%s -> %d %s%s", *args, exc_info=failure)
    else:
        _log.warning("%s -> %d %s%s; logged where the record was made", *args)
