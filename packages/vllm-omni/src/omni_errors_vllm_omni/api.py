"""The API process's boundary: how a record reaches the client, and how a dead pipeline ends the server.

- Exception handlers: the core's `omni_errors.server.vllm_api.install_api` on vLLM-Omni's app, after
  vLLM-Omni's own registration, so its handlers are replaced class by class, inside the Prometheus
  middleware (the error contract in `/openapi.json`, the 413 of a body over the limit, what vLLM's
  routes do with failures, the requests in flight, raw fallbacks on).
- An error helper that builds a response inside an `except` block (the diffusion chat route's
  `_create_error_response`) uses the record of the exception being handled, so status,
  `error.code`, `error.type` and the sanitized message agree (video jobs: `video_jobs`).
- `_raise_nonfatal_error_message` raises `rebuild(record)` for an `ErrorMessage`.
- `requests_failed_total{reason}`: a client error is counted as `client_error`, not `stage_error`.
- `serve_http`: the core's `omni_errors.server.fatal_stop.stop_on_fatal`: on a fatal failure the
  server answers what is in flight, then stops, and the process exits with the documented code.
- Multi-node mode (`distributed`): while a stage waits for a replica, a new request gets 503 with
  `Retry-After` at once, and a fatal record answered to a client does not end the head (the lost
  replica's stage decides, when its window passes: `omni_errors.fatal.process.defer_to_stages`).
"""

from __future__ import annotations

import sys
from types import ModuleType
from typing import Any

from omni_errors import OmniErrorDetails
from omni_errors.fatal import process as fatal
from omni_errors.server.rejoin import rebuilt, refuse_new_request
from omni_errors.server.vllm_api import API_RAW_FALLBACKS

__all__ = [
    "make_abort_internal",
    "make_chat_error_response",
    "make_engine_error_response",
    "make_generate",
    "make_normalize_reason",
    "make_raise_error_message",
    "make_record_failure",
    "make_register_handlers",
    "make_serve_http",
]

_CLIENT_ERROR_REASON = "client_error"


def _handled_record() -> OmniErrorDetails | None:
    """The record of the exception being handled, if the caller is inside an `except` block."""
    exc = sys.exc_info()[1]
    if exc is None:
        return None
    from omni_errors.semantics.classification import classify

    return classify(exc, raw_fallbacks=API_RAW_FALLBACKS)


def make_register_handlers(module: ModuleType, original: Any) -> Any:
    """`_register_omni_exception_handlers`: the core's boundary after vLLM-Omni's own handlers."""
    from omni_errors.server.vllm_api import install_api

    from omni_errors_vllm_omni.video_jobs import document_video_jobs

    def register(app: Any) -> None:
        original(app)
        install_api(app)
        document_video_jobs(app)

    return register


def make_serve_http(module: ModuleType, original: Any) -> Any:
    """`serve_http`: the server stops on a fatal failure, then the process exits with its code."""
    from omni_errors.server.fatal_stop import stop_on_fatal

    return stop_on_fatal(original)


def make_engine_error_response(module: ModuleType, original: Any) -> Any:
    """`_create_engine_error_json_response`: renders the record (and starts the fatal shutdown)."""
    from omni_errors.server.vllm_api import engine_error_response

    def _create_engine_error_json_response(req: Any, exc: Exception) -> Any:
        return engine_error_response(req, exc)

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

    async def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        refuse_new_request()
        async for output in original(self, *args, **kwargs):
            yield output

    return generate


def make_raise_error_message(module: ModuleType, original: Any) -> Any:
    """`OmniBase._raise_nonfatal_error_message` raises the message's record, rebuilt."""
    from omni_errors_vllm_omni.records import message_record

    def _raise_nonfatal_error_message(self: Any, msg: Any) -> None:
        raise rebuilt(message_record(msg))

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
