"""Request ids: the id each request is given, and the `x-request-id` header of its answer.

A route gives an accepted request its id (`request_id`: the client's `x-request-id` when the record
can carry it, else a fresh one); the records of its failures carry that id in their body, and
`RequestIdHeader` puts it on the answer's `x-request-id` header, error answers included, so that a
client (the OpenAI SDK reads `error.request_id` from this header) can quote it. A request refused
before it was given an id answers with the client's own `x-request-id`, when it sent an acceptable
one, as vLLM's `--enable-request-id-headers` does.
"""

from __future__ import annotations

import contextvars
import uuid
from typing import Any

from omni_errors.semantics.ids import request_id_fits

__all__ = ["RequestIdHeader", "acceptable_id", "request_id"]

_HEADER = b"x-request-id"
#: The ids given during the request in progress (a list shared with the route's task, whose context is a copy).
_given: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("omni_errors_request_ids", default=None)


def acceptable_id(value: str) -> bool:
    """Whether a client's id can name its request: printable, and short enough for the record to carry."""
    return value.isprintable() and request_id_fits(value)


def request_id(prefix: str, header: str | None) -> str:
    """The client's `x-request-id` when it is an acceptable id, else a fresh `prefix-<hex>`; the
    answer of the request in progress carries it in its `x-request-id` header."""
    rid = header if header and acceptable_id(header) else f"{prefix}-{uuid.uuid4().hex}"
    given = _given.get()
    if given is not None:
        given.append(rid)
    return rid


class RequestIdHeader:
    """An ASGI middleware: an HTTP answer without `x-request-id` gets the id its request was given,
    else the client's own acceptable `x-request-id`, else none."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given: list[str] = []
        token = _given.set(given)

        async def send_with_id(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                rid = given[-1] if given else _client_id(scope)
                if rid is not None and all(name.lower() != _HEADER for name, _ in headers):
                    message = {**message, "headers": [*headers, (_HEADER, rid.encode("latin-1", "replace"))]}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            _given.reset(token)


def _client_id(scope: Any) -> str | None:
    for name, value in scope.get("headers", []):
        if name.lower() == _HEADER:
            text = value.decode("latin-1")
            return text if acceptable_id(text) else None
    return None
