"""Server-sent events after success headers: exactly one terminal error event, then `data: [DONE]`.

The event carries the same nested `error` object as the non-streaming body (`{"error": {...}}`),
so a client parses one shape whether the failure came before or after the first byte.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterable, AsyncIterator

from omni_errors._native import OmniErrorDetails
from omni_errors.render import error_body
from omni_errors.semantics.reporting import report

__all__ = ["SSE_DONE", "sse_error_event", "sse_guard", "sse_terminal"]

SSE_DONE = "data: [DONE]\n\n"


def sse_error_event(details: OmniErrorDetails) -> str:
    """The terminal event: `data: {"error": {...}}` and a blank line."""
    return f"data: {json.dumps(error_body(details), ensure_ascii=False, separators=(',', ':'))}\n\n"


def sse_terminal(details: OmniErrorDetails) -> str:
    """The error event followed by `data: [DONE]`: everything a stream sends once it has failed."""
    return sse_error_event(details) + SSE_DONE


async def sse_guard(
    events: AsyncIterable[str],
    *,
    request_id: str | None = None,
    stage_id: int | None = None,
    raw_fallbacks: bool = True,
) -> AsyncIterator[str]:
    """Pass `events` through; if they raise, end the stream with `sse_terminal` for the reported error.

    Cancellation (the client went away) is not an error and propagates unchanged.
    """
    try:
        async for event in events:
            yield event
    except Exception as exc:  # omni-errors: ignore[OE202]: the terminal SSE error event is the answer
        where = "stream" if request_id is None else f"stream {request_id}"
        yield report(
            exc, sse_terminal, where=where, request_id=request_id, stage_id=stage_id, raw_fallbacks=raw_fallbacks
        )
