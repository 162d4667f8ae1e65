"""A vLLM API server's error boundary: every failure that reaches the app is answered with its record.

`install_api(app)` is what vLLM-Omni's API server registers (the plugin's wrap on the 0.30
release, vLLM-Omni's own `_register_omni_exception_handlers` on the upstream series):

- `omni_errors.server.install`'s handlers, with the raw fallbacks on (`API_RAW_FALLBACKS`: a raw
  `ValueError` that reaches the app was raised by request parsing in the API process; stage failures
  arrive as rebuilt carriers);
- what vLLM's routes do with failures (`route_errors`), and the headers a failure notes for its
  answer (`AnswerHeaders`);
- the requests in flight, which the fatal stop waits on (`InFlight`, `fatal_stop`);
- a body over `max_body_bytes()` answered 413 before it is read (`BodyLimit`), and the error
  contract in `/openapi.json` (`API_ERROR_STATUSES`).

A fatal record answered to a client ends the process (`omni_errors.fatal.process.answered`).
`engine_error_response` is the same answer for a route that renders the failure it caught itself.
"""

from __future__ import annotations

from typing import Any

from omni_errors.fatal import process as fatal
from omni_errors.semantics.reporting import FatalHook
from omni_errors.settings import MAX_BODY_BYTES

__all__ = [
    "API_ERROR_STATUSES",
    "API_RAW_FALLBACKS",
    "engine_error_response",
    "install_api",
    "max_body_bytes",
]

#: What any operation can answer, in `/openapi.json` beside what each route declares: a request the
#: route cannot take (400, never FastAPI's 422 for validation), a body over the limit (413), one it
#: refuses (422: a content guardrail, a missing image), the safety net (500), an API this deployment
#: does not serve (501), a paused, sleeping, rejoining or dead engine (503). A path naming a
#: resource adds 404.
API_ERROR_STATUSES = (400, 413, 422, 500, 501, 503)
#: The raw-fallback default of the HTTP boundary (see the module docstring).
API_RAW_FALLBACKS = True


def max_body_bytes() -> int:
    """The request body limit this process serves with (`settings.MAX_BODY_BYTES`)."""
    return int(MAX_BODY_BYTES.read())


def install_api(app: Any, *, on_fatal: FatalHook = fatal.answered) -> None:
    """Register the boundary on `app` (see the module docstring); call it once, before serving."""
    from fastapi import HTTPException as FastAPIHTTPException
    from starlette.exceptions import HTTPException

    from omni_errors.server.answer_headers import AnswerHeaders
    from omni_errors.server.body_limit import BodyLimit
    from omni_errors.server.in_flight import InFlight
    from omni_errors.server.openapi import document_errors
    from omni_errors.server.register import install, make_handler
    from omni_errors.server.route_errors import cause_first, unbuilt_route, with_headers

    # vLLM's app building may already have assembled Starlette's middleware stack, whose
    # ExceptionMiddleware holds a copy of the handlers: drop it, so that the next call (uvicorn's
    # lifespan startup) builds it again with these handlers and middlewares in it.
    app.middleware_stack = None
    app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes())
    app.add_middleware(InFlight)
    app.add_middleware(AnswerHeaders)
    install(app, raw_fallbacks=API_RAW_FALLBACKS, on_fatal=on_fatal)
    handler = unbuilt_route(make_handler(raw_fallbacks=API_RAW_FALLBACKS, on_fatal=on_fatal))
    app.add_exception_handler(AttributeError, handler)
    for cls in (FastAPIHTTPException, HTTPException):
        app.add_exception_handler(cls, with_headers(cause_first(handler)))
    document_errors(app, every_operation=API_ERROR_STATUSES, templated=(404,))


def engine_error_response(request: Any, exc: Exception, *, on_fatal: FatalHook = fatal.answered) -> Any:
    """The answer to `exc`, caught by the route serving `request`: its record, rendered (a fatal
    record also ends the process, through `on_fatal`)."""
    from omni_errors.render.http import http_response
    from omni_errors.semantics.reporting import report

    metadata = getattr(request.state, "request_metadata", None)
    request_id = getattr(metadata, "request_id", None)
    return report(
        exc,
        http_response,
        where=f"{request.method} {request.url.path}",
        request_id=request_id if isinstance(request_id, str) else None,
        raw_fallbacks=API_RAW_FALLBACKS,
        on_fatal=on_fatal,
    )
