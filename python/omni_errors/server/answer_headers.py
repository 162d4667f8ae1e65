"""Headers a request's answer carries whichever renderer builds it.

vLLM-Omni's chat route builds its error body through a helper (`_create_error_response`, the
plugin's or, on the upstream series, vLLM-Omni's own) and answers `JSONResponse(body)`: a header
the failure called for would be lost there. What raises a failure that says when a retry may
succeed (`retry_later`) notes its `Retry-After` for the request in progress, and `AnswerHeaders`
puts it on that request's answer if the answer has the status it was noted for.
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

from omni_errors.render.http import retry_after_header

if TYPE_CHECKING:
    from omni_errors.semantics.exceptions import OmniServerError

__all__ = ["AnswerHeaders", "note_headers", "retry_later"]

#: The headers noted for the request in progress, by the answer status they belong to.
_answer_headers: contextvars.ContextVar[dict[int, dict[str, str]] | None] = contextvars.ContextVar(
    "omni_errors_answer_headers", default=None
)


class AnswerHeaders:
    """An ASGI middleware: the headers noted during a request (`note_headers`) go on its answer if
    its status is the one they were noted for; a header the answer already has is kept."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        noted: dict[int, dict[str, str]] = {}  # shared with the route's task, whose context is a copy
        token = _answer_headers.set(noted)

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start" and message["status"] in noted:
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [
                    (name.lower().encode("latin-1"), value.encode("latin-1"))
                    for name, value in noted[message["status"]].items()
                    if name.lower().encode("latin-1") not in present
                ]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_headers)
        finally:
            _answer_headers.reset(token)


def note_headers(status: int, headers: dict[str, str]) -> None:
    """Put `headers` on this request's answer if its status is `status` (outside a request: nothing)."""
    noted = _answer_headers.get()
    if noted is not None and headers:
        noted.setdefault(status, {}).update(headers)


def retry_later(failure: OmniServerError, seconds: int | None) -> OmniServerError:
    """`failure` says a retry may succeed after `seconds` (None: it does not say): its `retry_after`,
    and the `Retry-After` of this request's answer if that is a 503. Returns `failure`, to raise."""
    failure.retry_after = seconds
    note_headers(503, retry_after_header(failure))
    return failure
