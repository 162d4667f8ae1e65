"""A bounded request body: `BodyLimit`, ASGI middleware answering 413 with the record before a body
over the limit is read or parsed (vLLM reads and parses any size: a 50 MB JSON body took 3.4 s to
reach its 400).

Two cases, because a client need not say the size first:
- a `Content-Length` over the limit is answered at once, before the application runs; the record
  goes through `report` (counted, logged) like any other;
- a body without one (chunked) is counted as it arrives; the chunk that passes the limit raises
  Starlette's `HTTPException(413)` out of `receive`, inside the route that reads it, so the
  application's own handlers render it (FastAPI re-raises an `HTTPException` from body parsing;
  any other exception there would become its generic 400). One that escapes the application
  unanswered is answered here.

Add it inside the Prometheus instrumentation (before `attach_router`), so that the 413 is counted
as the status the client got.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omni_errors.render.http import http_response
from omni_errors.semantics.reporting import report

__all__ = ["BodyLimit", "BodyTooLargeError"]


class BodyTooLargeError(HTTPException):
    """413: the request body is over the server's limit (its size is said, the body never echoed)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than this server's limit of {limit} bytes")


class BodyLimit:
    """ASGI middleware: an HTTP request body of more than `max_body_bytes` gets 413 before it is parsed."""

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        if max_body_bytes < 1:
            raise ValueError(
                f"max_body_bytes must be at least 1, not {max_body_bytes}"
            )  # omni-errors: ignore[OE101]: a caller's defect
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.max_body_bytes
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            await self._answer(scope, receive, send)
            return
        received = 0
        started = False

        async def counted() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLargeError(limit)
            return message

        async def watched(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, watched)
        except BodyTooLargeError:
            if started:  # too late to answer; the server closes the connection
                raise
            await self._answer(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        where = f"{scope.get('method', '')} {scope.get('path', '')}"
        response = report(BodyTooLargeError(self.max_body_bytes), http_response, where=where)
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    """The request's `Content-Length`, if it has one that is a number (a server rejects a malformed one)."""
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None
