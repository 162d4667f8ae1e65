"""The API process's boundary: how a record reaches the client, and how a dead pipeline ends the server.

- Exception handlers: `omni_errors.server.install` on vLLM-Omni's app (after vLLM-Omni's own
  registration, so its handlers are replaced class by class, inside the Prometheus middleware);
  its `/openapi.json` states the error contract (`document_errors`, `API_ERROR_STATUSES`), and a
  body over `settings.max_body_bytes()` is answered 413 before it is read (`BodyLimit`).
  Raw fallbacks stay on at this boundary: a raw `ValueError` that reaches it was raised by request
  parsing in the API process (stage failures arrive as rebuilt carriers, never as raw types).
- Error helpers that build responses inside an `except` block (the diffusion chat route's
  `_create_error_response`, the video jobs' `_video_error_from_exception`) use the record of the
  exception being handled, so status, `error.code`, `error.type` and the sanitized message agree.
- `_raise_nonfatal_error_message` raises `rebuild(record)` for an `ErrorMessage`.
- What the plugin adds to vLLM-Omni's routes' answers (`handlers`): a route's 500 that wraps a
  record or vLLM's own client error, the headers an `HTTPException` carries, the routes this
  deployment never built, and vLLM's 404 for a model the diffusion server does not serve.
- `requests_failed_total{reason}`: a client error is counted as `client_error`, not `stage_error`.
- `serve_http`: on a fatal failure the HTTP server first writes the answer of every request in
  flight (`InFlight` counts them; `ANSWER_DEADLINE_S` bounds the wait), then gives what is on its
  way a last call (`LAST_CALL_S`), then stops; once it has shut down the process exits with the
  documented code (`SystemExit`, so every cleanup still runs).
- Multi-node mode (`distributed`): while a stage waits for a replica, a new request gets 503 with
  `Retry-After` at once, and a fatal record answered to a client does not end the head (the lost
  replica's stage decides, when its window passes).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from types import ModuleType
from typing import Any

from omni_errors._native import OmniErrorDetails, sanitize
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.vllm_omni import distributed
from omni_errors.vllm_omni.answer_headers import AnswerHeaders, retry_later
from omni_errors.vllm_omni.settings import ANSWER_DEADLINE_ENV, LOG_NAME, max_body_bytes, number_from_env

__all__ = [
    "ANSWER_DEADLINE_S",
    "API_ERROR_STATUSES",
    "API_RAW_FALLBACKS",
    "GRACEFUL_SHUTDOWN_S",
    "LAST_CALL_S",
    "InFlight",
    "make_abort_internal",
    "make_chat_error_response",
    "make_engine_error_response",
    "make_generate",
    "make_normalize_reason",
    "make_raise_error_message",
    "make_record_failure",
    "make_register_handlers",
    "make_serve_http",
    "make_video_error",
]

_log = logging.getLogger(LOG_NAME)

#: What any of vLLM-Omni's operations can answer with the plugin, in `/openapi.json` beside what each
#: route declares: a request the route cannot take (400, never FastAPI's 422 for validation), a body
#: over the limit (413), one it refuses (422: a content guardrail, a missing image), the safety net
#: (500), an API this deployment does not serve (501), a paused, sleeping, rejoining or dead engine
#: (503). A path naming a resource adds 404.
API_ERROR_STATUSES = (400, 413, 422, 500, 501, 503)

#: The raw-fallback default of the HTTP boundary (see the module docstring and docs/vllm-omni.md).
API_RAW_FALLBACKS = True
#: Once the server stops (a fatal failure, Ctrl+C, SIGTERM), in-flight responses get this long to
#: finish before it closes them: uvicorn would otherwise wait for them without a deadline, and a
#: request whose pipeline has stopped never finishes (Ctrl+C must end the server within 3 s).
GRACEFUL_SHUTDOWN_S = 0.5
#: ...and the server keeps accepting for this long first, answering what arrives with the fatal
#: record, so that a request already on its way gets an answer instead of a dropped connection.
LAST_CALL_S = 0.5
#: Before that last call, every request in flight when the pipeline ended is answered from the
#: record (the orchestrator has queued its answer): the stop waits until the server has written
#: them all, for at most this long (`OMNI_ERRORS_ANSWER_DEADLINE_S`, 3 s), so that none is left for
#: uvicorn to cancel with a bare 500.
ANSWER_DEADLINE_S = number_from_env(ANSWER_DEADLINE_ENV, 3.0, lambda v: v > 0, "a positive number of seconds")
_DRAIN_POLL_S = 0.01

_CLIENT_ERROR_REASON = "client_error"
_tasks: set[asyncio.Task[None]] = set()  # the stop tasks, kept alive until they finish


class InFlight:
    """An ASGI middleware that counts the HTTP requests the server has not finished answering, and
    answers one the stopping server cancels after a fatal failure with the fatal record.

    Such a request reached the engine as the pipeline ended, after its requests had been answered
    (a loaded machine widens that window): nothing will ever answer it, and once the stop's
    deadline has passed uvicorn cancels it, which would leave the client a bare 500.
    """

    count = 0  # one API server per process: the count is the process's

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_noting_start(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        InFlight.count += 1
        try:
            await self.app(scope, receive, send_noting_start)
        except asyncio.CancelledError:
            record = fatal.declared()
            if started or record is None:
                raise
            from omni_errors.render.http import http_response
            from omni_errors.semantics.reporting import report

            response = report(record, http_response, where=f"{scope['method']} {scope['path']}")
            await response(scope, receive, send)
        finally:
            InFlight.count -= 1

    @classmethod
    async def drained(cls, deadline: float) -> bool:
        """Wait until no request is in flight, or until the loop time `deadline`; True if none is."""
        loop = asyncio.get_running_loop()
        while cls.count > 0 and loop.time() < deadline:
            await asyncio.sleep(_DRAIN_POLL_S)
        return cls.count == 0


def _handled_record() -> OmniErrorDetails | None:
    """The record of the exception being handled, if the caller is inside an `except` block."""
    exc = sys.exc_info()[1]
    if exc is None:
        return None
    from omni_errors.semantics.classification import classify

    return classify(exc, raw_fallbacks=API_RAW_FALLBACKS)


def _on_fatal_response(details: OmniErrorDetails) -> None:
    """A fatal record reached a client: it ends the process, unless the pipeline already decided
    why it ends (the record is then that decision's answer, and its exit code stands), or a
    multi-node head decides when a stage's replicas are lost."""
    if fatal.declared() is None and not distributed.active():
        fatal.declare(details, ExitCode.FATAL_ENGINE)


def _request_id(request: Any) -> str | None:
    metadata = getattr(request.state, "request_metadata", None)
    request_id = getattr(metadata, "request_id", None)
    return request_id if isinstance(request_id, str) else None


def make_register_handlers(module: ModuleType, original: Any) -> Any:
    """`_register_omni_exception_handlers`: our handlers after vLLM-Omni's own."""
    from fastapi import HTTPException as FastAPIHTTPException
    from starlette.exceptions import HTTPException

    from omni_errors.server import BodyLimit, document_errors, install
    from omni_errors.server.register import make_handler
    from omni_errors.vllm_omni.handlers import cause_first, unbuilt_route, with_headers

    def register(app: Any) -> None:
        original(app)
        # vLLM's app building has already assembled Starlette's middleware stack once, and its
        # ExceptionMiddleware holds a copy of the handlers: drop the stack so that the next
        # call (uvicorn's lifespan startup) builds it again with these handlers in it.
        app.middleware_stack = None
        app.add_middleware(BodyLimit, max_body_bytes=max_body_bytes())
        app.add_middleware(InFlight)
        app.add_middleware(AnswerHeaders)
        install(app, raw_fallbacks=API_RAW_FALLBACKS, on_fatal=_on_fatal_response)
        handler = unbuilt_route(make_handler(raw_fallbacks=API_RAW_FALLBACKS, on_fatal=_on_fatal_response))
        app.add_exception_handler(AttributeError, handler)
        for cls in (FastAPIHTTPException, HTTPException):
            app.add_exception_handler(cls, with_headers(cause_first(handler)))
        document_errors(app, every_operation=API_ERROR_STATUSES, templated=(404,))

    return register


def make_serve_http(module: ModuleType, original: Any) -> Any:
    """`serve_http`: the server stops on a fatal failure, then the process exits with its code."""

    async def serve_http(app: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()

        async def answer_then_stop() -> None:
            # Every request in flight has its answer queued: let the server write them all, then
            # give what is on its way the last call, then stop (still bounded by the deadline).
            deadline = loop.time() + ANSWER_DEADLINE_S
            if not await InFlight.drained(deadline):
                _log.error("omni-errors: %d request(s) still unanswered after the fatal failure", InFlight.count)
            await asyncio.sleep(LAST_CALL_S)
            await InFlight.drained(deadline + LAST_CALL_S)
            server = getattr(app.state, "server", None)
            if server is not None:
                server.should_exit = True

        def start_stop() -> None:
            task = loop.create_task(answer_then_stop())
            _tasks.add(task)
            task.add_done_callback(_tasks.discard)

        def stop(_details: OmniErrorDetails) -> None:
            loop.call_soon_threadsafe(start_stop)

        def bound_graceful_shutdown() -> None:  # runs once serve_http has created the server
            server = getattr(app.state, "server", None)
            if server is not None:
                server.config.timeout_graceful_shutdown = GRACEFUL_SHUTDOWN_S

        fatal.on_fatal(stop)
        loop.call_soon(bound_graceful_shutdown)
        return _exit_after(await original(app, *args, **kwargs))

    return serve_http


def make_engine_error_response(module: ModuleType, original: Any) -> Any:
    """`_create_engine_error_json_response`: renders the record (and starts the fatal shutdown)."""
    from omni_errors.render.http import http_response
    from omni_errors.semantics.reporting import report

    def _create_engine_error_json_response(req: Any, exc: Exception) -> Any:
        where = f"{req.method} {req.url.path}"
        return report(
            exc,
            http_response,
            where=where,
            request_id=_request_id(req),
            raw_fallbacks=API_RAW_FALLBACKS,
            on_fatal=_on_fatal_response,
        )

    return _create_engine_error_json_response


def make_abort_internal(module: ModuleType, original: Any) -> Any:
    """`AsyncOmniBase._abort_internal_requests`: no abort round trip to a pipeline that has ended.

    A failed request is aborted with a 2 s timeout; after a fatal failure nothing is left to take
    the abort, so waiting would only delay the answer past the 1 s every request is owed.
    """

    async def _abort_internal_requests(self: Any, request_id: Any, **kwargs: Any) -> Any:
        if fatal.declared() is not None:
            return None
        return await original(self, request_id, **kwargs)

    return _abort_internal_requests


def make_generate(module: ModuleType, original: Any) -> Any:
    """`AsyncOmni.generate`: after a fatal failure, a new request gets the fatal record at once; while
    a multi-node stage waits for a replica, 503 with `Retry-After`.

    The orchestrator is stopping by then (or has nowhere to send it); a request submitted to it
    would wait for an answer that never comes until the server closes the connection.
    """
    from omni_errors.semantics.exceptions import OmniServerError, rebuild

    async def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        record = fatal.declared()
        if record is not None:
            raise rebuild(record)
        outage = distributed.rejoin().outage() if distributed.active() else None
        if outage is not None:
            refused = OmniServerError.from_details(distributed.unavailable_answer(outage.stage_id, None))
            raise retry_later(refused, outage.retry_after())
        async for output in original(self, *args, **kwargs):
            yield output

    return generate


async def _exit_after(shutdown: Any) -> None:
    """Await the server's own shutdown, then end the process with the fatal exit code, if any."""
    await shutdown
    # Only a pipeline that ended exits with its code; a code merely noted (a multi-node replica lost
    # and replaced, say) does not turn a Ctrl+C into a failure.
    code = fatal.exit_code() if fatal.declared() is not None else None
    if code is not None:
        _log.critical("omni-errors: server stopped after a fatal stage failure; exiting with %d", code)
        raise SystemExit(code)


def make_raise_error_message(module: ModuleType, original: Any) -> Any:
    """`OmniBase._raise_nonfatal_error_message` raises the message's record, rebuilt."""
    from omni_errors.semantics.exceptions import OmniServerError, rebuild
    from omni_errors.vllm_omni.records import message_record

    def _raise_nonfatal_error_message(self: Any, msg: Any) -> None:
        details = message_record(msg)
        failure = rebuild(details)
        if isinstance(failure, OmniServerError):
            retry_later(failure, distributed.retry_after(details))
        raise failure

    return _raise_nonfatal_error_message


def make_record_failure(module: ModuleType, original: Any) -> Any:
    """`OmniBase._record_request_failure_once`: a client failure is counted as `client_error`."""

    def _record_request_failure_once(self: Any, request_id: str, reason: str) -> None:
        if reason == "stage_error":
            details = _handled_record()
            if details is not None and details.category == "client":
                reason = _CLIENT_ERROR_REASON
        original(self, request_id, reason)

    return _record_request_failure_once


def make_normalize_reason(module: ModuleType, original: Any) -> Any:
    """`omni_base.normalize_failure_reason` keeps the `client_error` reason."""

    def normalize_failure_reason(reason: str | None) -> str:
        return reason if reason == _CLIENT_ERROR_REASON else str(original(reason))

    return normalize_failure_reason


def make_chat_error_response(module: ModuleType, original: Any) -> Any:
    """`OmniOpenAIServingChat._create_error_response` from the handled record."""
    from omni_errors.render import error_response
    from omni_errors.semantics.reporting import report

    def _create_error_response(
        self: Any, message: str, err_type: str = "BadRequestError", status_code: int = 400
    ) -> Any:
        exc = sys.exc_info()[1]  # the helper is called inside the `except` that caught the failure
        if exc is None:
            return original(self, message, err_type, status_code)
        # A 503's `Retry-After` was noted where the failure was raised (`retry_later`).
        return report(exc, error_response, where="chat completion", raw_fallbacks=API_RAW_FALLBACKS)

    return _create_error_response


def make_video_error(module: ModuleType, original: Any) -> Any:
    """`video.generation.helpers._video_error_from_exception`: a failed job stores the record's status and text."""
    from omni_errors.semantics.reporting import report

    video_error = module.VideoError

    def stored(details: OmniErrorDetails) -> Any:
        return video_error(code=details.status_code, message=sanitize(details.message))

    def _video_error_from_exception(exc: Exception) -> Any:
        # The job was accepted (200, queued) before it ran: whatever fails now is the server's.
        return report(exc, stored, where="video job", raw_fallbacks=False)

    return _video_error_from_exception
