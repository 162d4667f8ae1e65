"""`classify`: exception -> `OmniErrorDetails`, by the core table extended with vLLM's hierarchy and the Omni types.

`TABLE` is `omni_errors.semantics.core_table.CORE` with the rows below in front of it, most specific first;
`classify()` takes the first class of `type(exc).__mro__` that has a row (`omni_errors.semantics.rules`), so a
subclass inherits its parent's row until it gets its own. The same table produces the error
catalogue (`omni_errors.semantics.catalog`, `docs/errors.md`).

Importing this module imports vLLM (the rows name its classes); `import omni_errors` alone does not.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import jinja2
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from vllm.entrypoints.serve.exception_handling.handlers.validation import clean_loc_for_param
from vllm.exceptions import (
    GenerationError,
    GracefulHTTPError,
    LoRAAdapterNotFoundError,
    VLLMClientError,
    VLLMError,
    VLLMNotFoundError,
    VLLMServerError,
    VLLMUnprocessableEntityError,
    VLLMValidationError,
)
from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

from omni_errors._native import OmniErrorDetails
from omni_errors.semantics.core_table import CORE, FATAL, TIMEOUT, UNAVAILABLE
from omni_errors.semantics.exceptions import (
    GuardrailViolationError,
    OmniClientError,
    OmniConflictError,
    OmniEngineDeadError,
    OmniEngineGenerateError,
    OmniNotImplementedError,
    OmniServerError,
    OmniServiceUnavailableError,
    OmniStageTimeoutError,
)
from omni_errors.semantics.rules import LazyClass, Rule

__all__ = ["RULES", "TABLE", "classify", "rule_for"]


# vLLM bounds what a validation error echoes (handlers/validation.py); we echo less: locations and
# messages only, never the rejected `input` values.
_MAX_REPORTED_ERRORS = 10


def _validation_summary(exc: BaseException) -> tuple[str, str | None]:
    """Message and parameter of a FastAPI `RequestValidationError`, without the rejected inputs."""
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

# Classes vLLM 0.30 lacks (it raises plain types there), and vLLM-Omni's own classes (this module
# must not import vLLM-Omni: it imports vLLM and patches it); lazy rows are matched once loaded.
CHAT_TEMPLATE_RESOLUTION_ERROR = LazyClass("vllm.exceptions", "ChatTemplateResolutionError")
RETRYABLE_REQUEST_ERROR = LazyClass("vllm.exceptions", "RetryableRequestError")
VLLM_OMNI_CLIENT_ERROR = LazyClass("vllm_omni.errors", "OmniClientError")
VLLM_OMNI_ENGINE_DEAD_ERROR = LazyClass("vllm_omni.entrypoints.omni_base", "OmniEngineDeadError")

# fmt: off
TABLE = CORE.extend([
    # Wire carriers: the record travelled with the exception.
    (OmniClientError, Rule("client", 400, carrier=True, summary="Client error rebuilt from a record, as carried")),
    (OmniServerError, Rule("server", 500, carrier=True, summary="Server error rebuilt from a record, as carried")),
    # Omni types (RFC, table 2).
    (GuardrailViolationError, Rule("client", 400, _BAD, parameter_attr="parameter",
                                   summary="A guardrail rejected the request content")),
    (OmniConflictError, Rule("client", 409, "ConflictError", summary="Existing async job is in an incompatible state")),
    (OmniNotImplementedError, Rule("server", 501, "NotImplementedError", stage_attr="stage_id",
                                   summary="Invoked server operation is not implemented")),
    (OmniServiceUnavailableError, replace(UNAVAILABLE, stage_attr="stage_id",
                                          summary="Required handler, pipeline or stage is unavailable")),
    (OmniStageTimeoutError, replace(TIMEOUT, stage_attr="stage_id", summary="Stage or generation deadline expired")),
    (OmniEngineGenerateError, Rule("server", 500, _ISE, stage_attr="stage_id",
                                   summary="Nonfatal stage failure; the stage keeps serving")),
    (OmniEngineDeadError, replace(FATAL, stage_attr="stage_id", carrier=True, summary="Fatal stage failure")),
    # vLLM-Omni 0.30's own classes, as raised by a process without the plugin.
    (VLLM_OMNI_CLIENT_ERROR, Rule(None, 400, status_attr="status_code", message_attr="message",
                                  type_attr="error_type",
                                  summary="vLLM-Omni's client error (guardrails included): its own status and type")),
    (VLLM_OMNI_ENGINE_DEAD_ERROR, replace(FATAL, stage_attr="error_stage_id",
                                          summary="vLLM-Omni's fatal stage failure (`error_stage_id`)")),
    # vLLM's hierarchy (RFC, table 1; vLLM's create_error_response).
    (GracefulHTTPError, Rule(None, 500, status_attr="http_status", message_attr="message",
                             summary="Admission control and the like; the class carries its own status")),
    (VLLMValidationError, Rule("client", 400, _BAD, parameter_attr="parameter",
                               summary="Invalid or incompatible request parameter (value never echoed)")),
    (VLLMUnprocessableEntityError, Rule("client", 422, "UnprocessableEntityError", parameter_attr="parameter",
                                        summary="Inaccessible or undecodable request media")),
    (LoRAAdapterNotFoundError, Rule("client", 404, "NotFoundError", message_attr="message",
                                    summary="LoRA adapter not found")),
    (VLLMNotFoundError, Rule("client", 404, "NotFoundError", summary="Missing model, LoRA, voice, job or artifact")),
    (CHAT_TEMPLATE_RESOLUTION_ERROR, Rule("client", 400, _BAD, summary="Chat template could not be resolved")),
    (VLLMClientError, Rule("client", 400, _BAD, summary="Any other client-caused error")),
    (RETRYABLE_REQUEST_ERROR, Rule("server", 503, "ServiceUnavailableError", status_attr="status_code",
                                 summary="Transient request failure, safe to retry")),
    (GenerationError, Rule("server", 500, _ISE, status_attr="status_code",
                           summary="finish_reason reported an internal error")),
    (EngineDeadError, replace(FATAL, summary="Unrecoverable engine failure")),
    (EngineGenerateError, Rule("server", 500, _ISE, summary="Recoverable per-request engine failure")),
    (VLLMServerError, Rule("server", 500, _ISE, summary="Any other server-caused error")),
    (VLLMError, Rule("server", 500, _ISE, summary="A vLLM error outside the client/server split")),
    # Framework errors.
    (RequestValidationError, Rule("client", 400, _BAD, extract=_validation_summary,
                                  summary="Request body failed schema validation (inputs never echoed)")),
    (HTTPException, Rule(None, 500, status_attr="status_code", message_attr="detail",
                         summary="Starlette/FastAPI HTTPException; its own status")),
    # vLLM's migration fallback for template rendering, applied while `raw_fallbacks` is on.
    (jinja2.TemplateError, Rule("client", 400, _BAD, raw_fallback=True,
                                summary="Chat template rendering failed (vLLM's fallback; off: 500)")),
])
# fmt: on
RULES: Mapping[type[BaseException] | LazyClass, Rule] = dict(TABLE.rows)
"""The classification table, in catalogue order (most specific first)."""


def rule_for(cls: type[BaseException], *, raw_fallbacks: bool = True, stage_known: bool = False) -> Rule:
    """The first rule along `cls.__mro__`, skipping fallback rows when they are off."""
    return TABLE.lookup(cls, raw_fallbacks=raw_fallbacks, stage_known=stage_known)


def classify(
    exc: BaseException,
    *,
    request_id: str | None = None,
    stage_id: int | None = None,
    raw_fallbacks: bool = True,
) -> OmniErrorDetails:
    """The canonical record of `exc`.

    Args:
        exc: any exception.
        request_id: the request it failed, if known; kept unless the record already has one.
        stage_id: the stage it came from, if known; an id the exception carries takes precedence.
            Passing it also marks a raw `asyncio.TimeoutError` as a stage deadline (504).
        raw_fallbacks: vLLM's migration fallback for raw `ValueError`/`TypeError`/`OverflowError`
            (400) and `NotImplementedError` (501), on by default as in vLLM 0.33; off, they are
            unknown failures (500). Each boundary passes its own (`install(app, raw_fallbacks=...)`).

    Returns:
        A validated, sanitized record. Unknown exceptions are server 500; this never raises for a
        well-formed `exc`, whatever its text.
    """
    return TABLE.classify(exc, request_id=request_id, stage_id=stage_id, raw_fallbacks=raw_fallbacks)
