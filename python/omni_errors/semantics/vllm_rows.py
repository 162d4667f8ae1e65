"""The rows the full classify table puts in front of the core's (`omni_errors.semantics.core_table`): the
Omni types, vLLM's hierarchy and the framework errors, most specific first.

Every class is named by its module and name (`NamedClass`, or `LazyClass` for a module that may be
absent), never imported here: `omni_errors.semantics.classification` imports them to build `TABLE`,
and the catalogue (`omni-errors catalog`) renders these rows without importing vLLM, which imports
torch (seconds, and its deprecation warnings, for a page of text).
"""

from __future__ import annotations

from dataclasses import replace

from omni_errors.semantics.core_table import FATAL, TIMEOUT, UNAVAILABLE
from omni_errors.semantics.rules import LazyClass, NamedClass, Rule

__all__ = ["ROWS"]


# vLLM bounds what a validation error echoes (handlers/validation.py); we echo less: locations and
# messages only, never the rejected `input` values.
_MAX_REPORTED_ERRORS = 10


def _validation_summary(exc: BaseException) -> tuple[str, str | None]:
    """Message and parameter of a FastAPI `RequestValidationError`, without the rejected inputs."""
    from fastapi.exceptions import RequestValidationError
    from vllm.entrypoints.serve.exception_handling.handlers.validation import clean_loc_for_param
    from vllm.exceptions import VLLMValidationError

    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    if len(errors) == 1 and isinstance(errors[0], dict) and errors[0].get("type") == "json_invalid":
        return _json_decode_summary(errors[0], exc.body), "body"
    param: str | None = None
    for error in errors:
        ctx_error = (error.get("ctx") or {}).get("error") if isinstance(error, dict) else None
        if isinstance(ctx_error, VLLMValidationError) and ctx_error.parameter is not None:
            param = ctx_error.parameter
            break
    if param is None and errors and isinstance(errors[0], dict) and errors[0].get("loc"):
        param = clean_loc_for_param(tuple(errors[0]["loc"]))
    if not errors:
        return "Validation error", param
    label = "error" if len(errors) == 1 else "errors"
    lines = [f"{len(errors)} validation {label}:"]
    for error in errors[:_MAX_REPORTED_ERRORS]:
        loc = clean_loc_for_param(tuple(error.get("loc") or ()))
        lines.append(f"  {loc}: {error.get('msg', 'invalid value')}")
    if len(errors) > _MAX_REPORTED_ERRORS:
        lines.append(f"  ...and {len(errors) - _MAX_REPORTED_ERRORS} more {label}")
    return "\n".join(lines), param


def _json_decode_summary(error: dict[str, object], body: object) -> str:
    """Where a body that is not JSON stops being JSON, and what the parser expected there: FastAPI's
    error has the offset (`loc`: ("body", offset)), the parser's reason (`ctx.error`) and the body."""
    loc = error.get("loc")
    offset = loc[1] if isinstance(loc, tuple) and len(loc) == 2 and isinstance(loc[1], int) else None
    ctx = error.get("ctx")
    reason = ctx.get("error") if isinstance(ctx, dict) else None
    what = reason[:80] if isinstance(reason, str) and reason else "invalid JSON"  # json's own fixed text
    if offset is None:
        return f"The request body is not valid JSON: {what}"
    if isinstance(body, str) and 0 <= offset <= len(body):
        line = body.count("\n", 0, offset) + 1
        column = offset - (body.rfind("\n", 0, offset) + 1) + 1
        return f"The request body is not valid JSON: {what} at line {line}, column {column} (character {offset})"
    return f"The request body is not valid JSON: {what} at character {offset}"


_BAD, _ISE = "BadRequestError", "InternalServerError"


def _omni(name: str) -> NamedClass:
    return NamedClass("omni_errors.semantics.exceptions", name)


def _vllm(name: str) -> NamedClass:
    return NamedClass("vllm.exceptions", name)


def _engine(name: str) -> NamedClass:
    return NamedClass("vllm.v1.engine.exceptions", name)


# Classes an older supported vLLM lacks (0.30 raises plain types there; `EngineFaultedError` is new in
# 0.34), and vLLM-Omni's own classes (the table must not import vLLM-Omni: it imports vLLM and patches
# it); lazy rows are matched once loaded.
CHAT_TEMPLATE_RESOLUTION_ERROR = LazyClass("vllm.exceptions", "ChatTemplateResolutionError")
RETRYABLE_REQUEST_ERROR = LazyClass("vllm.exceptions", "RetryableRequestError")
ENGINE_FAULTED_ERROR = LazyClass("vllm.exceptions", "EngineFaultedError")
VLLM_OMNI_CLIENT_ERROR = LazyClass("vllm_omni.errors", "OmniClientError")
VLLM_OMNI_ENGINE_DEAD_ERROR = LazyClass("vllm_omni.entrypoints.omni_base", "OmniEngineDeadError")

ROWS: tuple[tuple[NamedClass, Rule], ...] = (
    # Wire carriers: the record travelled with the exception.
    (
        _omni("OmniClientError"),
        Rule("client", 400, carrier=True, summary="Client error rebuilt from a record, as carried"),
    ),
    (
        _omni("OmniServerError"),
        Rule("server", 500, carrier=True, summary="Server error rebuilt from a record, as carried"),
    ),
    # Omni types (RFC, table 2).
    (
        _omni("GuardrailViolationError"),
        Rule("client", 400, _BAD, parameter_attr="parameter", summary="A guardrail rejected the request content"),
    ),
    (
        _omni("OmniConflictError"),
        Rule("client", 409, "ConflictError", summary="Existing async job is in an incompatible state"),
    ),
    (
        _omni("OmniNotImplementedError"),
        Rule(
            "server",
            501,
            "NotImplementedError",
            stage_attr="stage_id",
            summary="Invoked server operation is not implemented",
        ),
    ),
    (
        _omni("OmniServiceUnavailableError"),
        replace(UNAVAILABLE, stage_attr="stage_id", summary="Required handler, pipeline or stage is unavailable"),
    ),
    (
        _omni("OmniStageTimeoutError"),
        replace(TIMEOUT, stage_attr="stage_id", summary="Stage or generation deadline expired"),
    ),
    (
        _omni("OmniEngineGenerateError"),
        Rule("server", 500, _ISE, stage_attr="stage_id", summary="Nonfatal stage failure; the stage keeps serving"),
    ),
    (_omni("OmniEngineDeadError"), replace(FATAL, stage_attr="stage_id", carrier=True, summary="Fatal stage failure")),
    # vLLM-Omni 0.30's own classes, as raised by a process without the plugin.
    (
        VLLM_OMNI_CLIENT_ERROR,
        Rule(
            None,
            400,
            status_attr="status_code",
            message_attr="message",
            type_attr="error_type",
            summary="vLLM-Omni's client error (guardrails included): its own status and type",
        ),
    ),
    (
        VLLM_OMNI_ENGINE_DEAD_ERROR,
        replace(FATAL, stage_attr="error_stage_id", summary="vLLM-Omni's fatal stage failure (`error_stage_id`)"),
    ),
    # vLLM's hierarchy (RFC, table 1; vLLM's create_error_response).
    # A faulted engine refuses new requests until fault tolerance recovers it: the process lives on,
    # so this is a retryable 503 (`Retry-After`), never a fatal stop.
    (
        ENGINE_FAULTED_ERROR,
        replace(
            UNAVAILABLE, message_attr="message", summary="A faulted engine awaiting recovery (vLLM 0.34+); retry later"
        ),
    ),
    (
        _vllm("GracefulHTTPError"),
        Rule(
            None,
            500,
            status_attr="http_status",
            message_attr="message",
            summary="Admission control and the like; the class carries its own status",
        ),
    ),
    (
        _vllm("VLLMValidationError"),
        Rule(
            "client",
            400,
            _BAD,
            parameter_attr="parameter",
            summary="Invalid or incompatible request parameter (value never echoed)",
        ),
    ),
    (
        _vllm("VLLMUnprocessableEntityError"),
        Rule(
            "client",
            422,
            "UnprocessableEntityError",
            parameter_attr="parameter",
            summary="Inaccessible or undecodable request media",
        ),
    ),
    (
        _vllm("LoRAAdapterNotFoundError"),
        Rule("client", 404, "NotFoundError", message_attr="message", summary="LoRA adapter not found"),
    ),
    (
        _vllm("VLLMNotFoundError"),
        Rule("client", 404, "NotFoundError", summary="Missing model, LoRA, voice, job or artifact"),
    ),
    (CHAT_TEMPLATE_RESOLUTION_ERROR, Rule("client", 400, _BAD, summary="Chat template could not be resolved")),
    (_vllm("VLLMClientError"), Rule("client", 400, _BAD, summary="Any other client-caused error")),
    (
        RETRYABLE_REQUEST_ERROR,
        Rule(
            "server",
            503,
            "ServiceUnavailableError",
            status_attr="status_code",
            summary="Transient request failure, safe to retry",
        ),
    ),
    (
        _vllm("GenerationError"),
        Rule("server", 500, _ISE, status_attr="status_code", summary="finish_reason reported an internal error"),
    ),
    (_engine("EngineDeadError"), replace(FATAL, summary="Unrecoverable engine failure")),
    (_engine("EngineGenerateError"), Rule("server", 500, _ISE, summary="Recoverable per-request engine failure")),
    (_vllm("VLLMServerError"), Rule("server", 500, _ISE, summary="Any other server-caused error")),
    (_vllm("VLLMError"), Rule("server", 500, _ISE, summary="A vLLM error outside the client/server split")),
    # Framework errors.
    (
        NamedClass("fastapi.exceptions", "RequestValidationError"),
        Rule(
            "client",
            400,
            _BAD,
            extract=_validation_summary,
            summary="Request body failed schema validation (inputs never echoed)",
        ),
    ),
    (
        NamedClass("starlette.exceptions", "HTTPException"),
        Rule(
            None,
            500,
            status_attr="status_code",
            message_attr="detail",
            summary="Starlette/FastAPI HTTPException; its own status",
        ),
    ),
    # vLLM's migration fallback for template rendering, applied while `raw_fallbacks` is on.
    (
        NamedClass("jinja2.exceptions", "TemplateError"),
        Rule(
            "client", 400, _BAD, raw_fallback=True, summary="Chat template rendering failed (vLLM's fallback; off: 500)"
        ),
    ),
)
