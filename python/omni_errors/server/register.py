"""Register omni_errors' handlers on a FastAPI/Starlette app.

Handlers are registered per concrete class, in four layers like vLLM's `init_exception_handler`:

1. framework errors (Starlette `HTTPException`, FastAPI `RequestValidationError`);
2. every class of the classification table and every subclass of `VLLMError` defined at install time
   (vLLM's hierarchy and the Omni types, `OmniClientError`/`OmniServerError` included);
3. the raw `ValueError`/`TypeError`/`OverflowError`/`NotImplementedError`, whether the migration
   fallback is on (400/400/400/501) or off (500), and the common builtin bases of internal
   failures (`RuntimeError`, `LookupError`, `OSError`, ...), always 500;
4. `Exception`, the safety net (HTTP), and `WebSocketSafetyNet` (WebSocket routes, which
   Starlette's `ServerErrorMiddleware` does not answer).

Starlette routes a handler registered for `Exception` (or `500`) to `ServerErrorMiddleware`, which
sits *outside* the Prometheus instrumentation; any other class is handled by `ExceptionMiddleware`,
*inside* it. Registering concrete classes is what makes `http_requests_total` record the status the
client actually got. The order of registration does not matter: Starlette walks the exception's MRO.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

from starlette.requests import HTTPConnection
from starlette.responses import Response
from starlette.websockets import WebSocket

from omni_errors.render.http import RETRY_AFTER_S, http_response, response_headers
from omni_errors.semantics.reporting import FatalHook, report

__all__ = ["handled_classes", "install", "make_handler"]

# Raw types: the four migration fallbacks, plus the builtin bases most internal failures derive from,
# so that they too are answered inside the instrumentation instead of by ServerErrorMiddleware.
_RAW = (
    ValueError,
    TypeError,
    OverflowError,
    NotImplementedError,
    RuntimeError,
    LookupError,
    AttributeError,
    OSError,
    ArithmeticError,
    AssertionError,
)


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def handled_classes() -> list[type[BaseException]]:
    """The classes `install` registers, `Exception` last."""
    from fastapi import HTTPException as FastAPIHTTPException
    from vllm.exceptions import VLLMError

    from omni_errors.semantics.classification import RULES

    # A lazy row's class is registered when its module is loaded; otherwise no instance can be raised yet,
    # and one raised later still reaches a concrete handler through its builtin base (`_RAW`).
    table = [lazy if isinstance(lazy, type) else lazy.resolve() for lazy in RULES]
    classes: list[type[BaseException]] = []
    # FastAPI's HTTPException subclasses Starlette's; vLLM registers its handler for FastAPI's,
    # and Starlette picks the handler of the most derived class, so both are registered.
    for cls in [*(c for c in table if c is not None), FastAPIHTTPException, VLLMError, *_subclasses(VLLMError), *_RAW]:
        if cls not in classes and cls is not BaseException and issubclass(cls, Exception) and cls is not Exception:
            classes.append(cls)
    return [*classes, Exception]


def _request_id(request: HTTPConnection) -> str | None:
    metadata = getattr(request.state, "request_metadata", None)
    request_id = getattr(metadata, "request_id", None) or getattr(request.state, "request_id", None)
    if isinstance(request_id, str):
        return request_id
    return request.headers.get("x-request-id")


def make_handler(
    *, raw_fallbacks: bool, on_fatal: FatalHook | None = None, retry_after_s: int = RETRY_AFTER_S
) -> Callable[[Any, Any], Any]:
    """The one handler: `report` the exception, rendered as HTTP (with the headers the exception
    asks for, `render.http.response_headers`) or, on a websocket route, as its close."""
    from omni_errors.render.websocket import send_error

    async def handle(conn: HTTPConnection, exc: Exception) -> Response | None:
        where = f"{conn.scope.get('method', 'WEBSOCKET')} {conn.url.path}"
        context: dict[str, Any] = {
            "request_id": _request_id(conn),
            "raw_fallbacks": raw_fallbacks,
            "on_fatal": on_fatal,
        }
        if isinstance(conn, WebSocket):  # ExceptionMiddleware also serves websocket routes
            await report(exc, partial(send_error, conn), where=where, **context)
            return None
        render = partial(http_response, headers=response_headers(exc), retry_after_s=retry_after_s)
        return report(exc, render, where=where, **context)

    return handle


def install(
    app: Any,
    *,
    raw_fallbacks: bool = True,
    on_fatal: FatalHook | None = None,
    retry_after_s: int = RETRY_AFTER_S,
) -> None:
    """Register the handlers on `app` (FastAPI or Starlette).

    Args:
        app: the application; call before it starts serving.
        raw_fallbacks: vLLM's migration fallback for raw `ValueError`/`TypeError`/`OverflowError`
            (400) and `NotImplementedError` (501); off, they are 500 like any unknown failure.
        on_fatal: called with the record of a fatal error (e.g. to start the lifecycle's shutdown),
            after it is counted and before the response is sent.
        retry_after_s: the `Retry-After` of a 503 whose exception does not say when to retry.
    """
    from omni_errors.server.websocket import WebSocketSafetyNet

    handler = make_handler(raw_fallbacks=raw_fallbacks, on_fatal=on_fatal, retry_after_s=retry_after_s)
    for cls in handled_classes():
        app.add_exception_handler(cls, handler)
    app.add_middleware(WebSocketSafetyNet, raw_fallbacks=raw_fallbacks, on_fatal=on_fatal)
