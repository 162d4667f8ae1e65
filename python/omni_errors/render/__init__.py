"""One renderer for every transport: the OpenAI-compatible envelope and how each transport ends.

- `http.http_response`: non-streaming HTTP, status == `error.code`;
- `sse`: one terminal `data: {"error": ...}` event, then `data: [DONE]`;
- `websocket`: one terminal JSON message, then a close code saying client or server fault;
- `jobs`: the stored record; metadata 200 with the embedded error, content with the stored status;
- `raise_error`: offline Python raises.

Every text a peer can write (message, parameter, request id) passes `omni_errors.sanitize` on the
way out, even though records are sanitized when built: a renderer never trusts that its input
came through the constructor unchanged (a decoded frame whose header claims this build's rule
set is not cleaned again on decode, and the claim may be false).
"""

from __future__ import annotations

from typing import Any, NoReturn

from omni_errors._native import MAX_PARAMETER_LEN, MAX_REQUEST_ID_LEN, OmniErrorDetails, sanitize

__all__ = ["error_body", "error_info", "error_response", "raise_error"]


def error_info(details: OmniErrorDetails) -> dict[str, Any]:
    """The nested `error` object: message, type, param, code, and request_id/stage_id when known."""
    parameter = details.parameter
    info: dict[str, Any] = {
        "message": sanitize(details.message),
        "type": details.error_type,
        "param": None if parameter is None else sanitize(parameter, max_len=MAX_PARAMETER_LEN),
        "code": details.status_code,
    }
    if details.request_id is not None:
        info["request_id"] = sanitize(details.request_id, max_len=MAX_REQUEST_ID_LEN)
    if details.stage_id is not None:
        info["stage_id"] = details.stage_id
    return info


def error_response(details: OmniErrorDetails) -> Any:
    """vLLM's own `ErrorResponse` model for the record (request_id/stage_id as its allowed extras)."""
    from vllm.entrypoints.serve.engine.protocol import ErrorInfo, ErrorResponse

    return ErrorResponse(error=ErrorInfo(**error_info(details)))


def error_body(details: OmniErrorDetails) -> dict[str, Any]:
    """The JSON envelope `{"error": {...}}`, validated through vLLM's `ErrorResponse`."""
    body: dict[str, Any] = error_response(details).model_dump()
    return body


def raise_error(details: OmniErrorDetails) -> NoReturn:
    """Offline rendering: raise the rebuilt exception (`OmniClientError`, `OmniServerError` or
    `OmniEngineDeadError`), which carries `details` as `.details`."""
    from omni_errors.semantics.exceptions import rebuild

    raise rebuild(details)
