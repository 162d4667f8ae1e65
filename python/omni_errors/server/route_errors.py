"""What a vLLM API server's routes do with failures, answered as the record says (`vllm_api.install_api`).

- A route's `HTTPException(500, "... failed: {exc}")` raised while handling an exception that
  already has its meaning (a stage failure's record, or vLLM's own client error: a
  `VLLMValidationError` naming its parameter) renders that exception (`cause_first`).
- The headers an `HTTPException` carries (`Allow` on a 405, naming every method of the path asked for;
  `WWW-Authenticate`, `Retry-After`) reach the client with the record (`with_headers`).
- A route whose serving object this deployment never built (`/v1/completions`, `/tokenize`, ...:
  an `AttributeError` on `app.state`, or on `None` in the route's body) answers as vLLM 0.33 does
  for a model without that API: 501 `NotImplementedError`, naming the route (`unbuilt_route`).
"""

from __future__ import annotations

import inspect
from typing import Any

from omni_errors._native import OmniErrorDetails

__all__ = ["cause_first", "unbuilt_route", "with_headers"]


def cause_first(handler: Any) -> Any:
    """Routes wrap what they do not recognise in `HTTPException(500, f"... failed: {exc}")`, raised
    while handling `exc`. When `exc` already says what it is, that is what the client must get, not a
    generic 500 with raw text: a stage failure rebuilt with its canonical record, or vLLM's own
    client error (the batch chat route wraps the `VLLMValidationError` of a bad `top_logprobs`)."""
    from vllm.exceptions import VLLMClientError

    async def handle(conn: Any, exc: Exception) -> Any:
        cause = exc.__cause__ or exc.__context__
        if getattr(exc, "status_code", 0) >= 500 and (
            isinstance(getattr(cause, "details", None), OmniErrorDetails) or isinstance(cause, VLLMClientError)
        ):
            return await handler(conn, cause)
        return await handler(conn, exc)

    return handle


def _unbuilt(conn: Any, exc: BaseException) -> bool:
    """Whether `exc` is a route reaching for a serving object this deployment never built: an
    attribute missing from `app.state`, or one of `None` read in the route's own body (vLLM 0.30's
    routes call the serving object without checking it, where vLLM 0.33 checks it)."""
    from starlette.datastructures import State

    if not isinstance(exc, AttributeError):
        return False
    if isinstance(exc.obj, State):
        return True
    if exc.obj is not None or exc.__traceback__ is None:
        return False
    endpoint = conn.scope.get("endpoint")
    tb = exc.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    return endpoint is not None and tb.tb_frame.f_code is getattr(inspect.unwrap(endpoint), "__code__", None)


def unbuilt_route(handler: Any) -> Any:
    """A route this deployment does not serve answers as vLLM 0.33 does ("The model does not support
    ... API": 501 `NotImplementedError`), naming the route, instead of a 500 quoting an attribute."""
    from omni_errors.semantics.exceptions import OmniNotImplementedError

    async def handle(conn: Any, exc: Exception) -> Any:
        # A route may wrap the failure in its own `HTTPException(500, str(exc))`.
        wrapped = getattr(exc, "status_code", 0) >= 500
        cause = exc if isinstance(exc, AttributeError) else (exc.__cause__ or exc.__context__) if wrapped else None
        if cause is not None and _unbuilt(conn, cause):
            route = getattr(conn.scope.get("route"), "path", None) or conn.url.path
            method = conn.scope.get("method", "GET")
            refused = OmniNotImplementedError(
                f"This deployment does not serve {method} {route}: the model does not support it"
            )
            return await handler(conn, refused)
        return await handler(conn, exc)

    return handle


def with_headers(handler: Any) -> Any:
    """The headers an `HTTPException` carries (`Allow` on a 405, `WWW-Authenticate`, `Retry-After`)
    reach the client beside the record."""

    async def handle(conn: Any, exc: Exception) -> Any:
        response = await handler(conn, exc)
        headers = dict(getattr(exc, "headers", None) or {})
        for name, value in headers.items():
            if response is not None and value and name.lower() not in response.headers:
                response.headers[name] = value
        if response is not None and response.status_code == 405 and (allowed := _allowed(conn)):
            # The renderer already copied Starlette's `Allow`, which names the first route's method only.
            response.headers["Allow"] = allowed
        return response

    return handle


def _allowed(conn: Any) -> str:
    """Every method the app serves on the path the request asked for: the template of the first
    route that matched it (Starlette's choice), whichever routes serve it. Starlette's 405 names only
    that route's methods, and vLLM registers one route per method (`GET` and `POST /ping`); a route
    whose template also matches (`/v1/videos/{video_id}` for `/v1/videos/sync`) serves another path."""
    from starlette.routing import Match

    probe = {**conn.scope, "method": ""}  # no route serves it: every route of the path matches partly
    matched = [
        route for route in getattr(conn.scope.get("app"), "routes", ()) if route.matches(probe)[0] is Match.PARTIAL
    ]
    asked = getattr(matched[0], "path", None) if matched else None
    methods: set[str] = set()
    for route in matched:
        if getattr(route, "path", None) == asked:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))
