"""Exception -> `OmniErrorDetails`, driven by one table walked along the exception's MRO.

`RULES` maps a class to how its instances are classified (category, status, OpenAI-style type,
parameter attribute, fatality, public message). `classify()` takes the first class of
`type(exc).__mro__` that has a rule, so a subclass inherits its parent's row until it gets its own.
The same table produces the error catalogue (`omni_errors.catalog`, `docs/errors.md`).

Importing this module imports vLLM and torch (the rows name their classes); `import omni_errors`
alone does not.
"""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import jinja2
import torch
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
from omni_errors._status import identifier, phrase, type_for_status
from omni_errors.errors import InvalidRecordError, OmniErrorsError
from omni_errors.exceptions import (
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
from omni_errors.lifecycle.failures import DEAD_MESSAGE

__all__ = [
    "NAMED_RULES",
    "RULES",
    "Rule",
    "classify",
    "raw_fallbacks_enabled",
    "rule_for",
    "set_raw_fallbacks",
    "type_for_status",
]

Category = Literal["client", "server"]
# Fields of an exception that become public text; returns (message, parameter).
Extractor = Callable[[BaseException], tuple[str, "str | None"]]


@dataclass(frozen=True, slots=True)
class Rule:
    """How instances of one class are classified.

    Attributes:
        category: "client" or "server"; None when the class carries its own HTTP status
            (`GracefulHTTPError`, Starlette `HTTPException`) and the category follows from it.
        status: the status, or the default when `status_attr` is missing or out of range.
        error_type: the OpenAI-style `type`; None derives it from the status (`type_for_status`).
        status_attr: instance attribute holding the status, if the class carries one.
        parameter_attr: instance attribute naming the rejected request parameter.
        message_attr: instance attribute holding the public message (else `args[0]`, else `str(exc)`).
        type_attr: instance attribute holding the OpenAI-style type (normalised to an identifier).
        public_message: a fixed public message that replaces the exception's own text.
        stage_attr: instance attribute holding the id of the stage that raised.
        fatal: the failure ends the stage (server only).
        carrier: the exception carries its canonical record in `.details`, used as is.
        raw_fallback: a raw Python type kept for vLLM's migration; applies only while the switch is on.
        stage_deadline: applies only when `classify()` is told the stage (a wait on a stage expired).
        extract: a function producing (message, parameter) for classes whose text needs assembling.
        summary: one line for the catalogue.
    """

    category: Category | None
    status: int
    error_type: str | None = None
    status_attr: str | None = None
    parameter_attr: str | None = None
    message_attr: str | None = None
    type_attr: str | None = None
    public_message: str | None = None
    stage_attr: str | None = None
    fatal: bool = False
    carrier: bool = False
    raw_fallback: bool = False
    stage_deadline: bool = False
    extract: Extractor | None = None
    summary: str = ""


# vLLM bounds what a validation error echoes (handlers/validation.py); we echo less: locations and
# messages only, never the rejected `input` values.
_MAX_REPORTED_ERRORS = 10


def _validation_summary(exc: BaseException) -> tuple[str, str | None]:
    """Message and parameter of a FastAPI `RequestValidationError`, without the rejected inputs."""
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
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


def _since_vllm_031(name: str) -> type[BaseException] | None:
    """A `vllm.exceptions` class that vLLM 0.30 lacks (`ChatTemplateResolutionError`,
    `RetryableRequestError`); its row is left out there, where vLLM raises plain types instead."""
    import vllm.exceptions

    cls = getattr(vllm.exceptions, name, None)
    return cls if isinstance(cls, type) and issubclass(cls, BaseException) else None


def _inductor_error() -> type[BaseException] | None:
    """torch's `InductorError`, if this torch build has the compiler package."""
    try:
        from torch._inductor.exc import InductorError
    except ImportError:  # pragma: no cover - torch builds without inductor
        return None
    return InductorError


# vLLM >= 0.31 names the public text of a dead engine; 0.30 has only its log text (same wording as DEAD_MESSAGE).
_DEAD = getattr(EngineDeadError, "CLIENT_MESSAGE", DEAD_MESSAGE)
_C: Category = "client"
_S: Category = "server"
_BAD, _ISE = "BadRequestError", "InternalServerError"

# fmt: off
_ROWS: list[tuple[type[BaseException] | None, Rule]] = [
    # Wire carriers: the record travelled with the exception.
    (OmniClientError, Rule(_C, 400, carrier=True, summary="Client error rebuilt from a record, as carried")),
    (OmniServerError, Rule(_S, 500, carrier=True, summary="Server error rebuilt from a record, as carried")),
    # Omni types (RFC, table 2).
    (GuardrailViolationError, Rule(_C, 400, _BAD, parameter_attr="parameter",
                                   summary="A guardrail rejected the request content")),
    (OmniConflictError, Rule(_C, 409, "ConflictError", summary="Existing async job is in an incompatible state")),
    (OmniNotImplementedError, Rule(_S, 501, "NotImplementedError", stage_attr="stage_id",
                                   summary="Invoked server operation is not implemented")),
    (OmniServiceUnavailableError, Rule(_S, 503, "ServiceUnavailableError", stage_attr="stage_id",
                                       summary="Required handler, pipeline or stage is unavailable")),
    (OmniStageTimeoutError, Rule(_S, 504, "GatewayTimeoutError", stage_attr="stage_id",
                                 summary="Stage or generation deadline expired")),
    (OmniEngineGenerateError, Rule(_S, 500, _ISE, stage_attr="stage_id",
                                   summary="Nonfatal stage failure; the stage keeps serving")),
    (OmniEngineDeadError, Rule(_S, 500, _ISE, public_message=_DEAD, stage_attr="stage_id", fatal=True, carrier=True,
                               summary="Fatal stage failure")),
    # vLLM's hierarchy (RFC, table 1; vLLM's create_error_response).
    (GracefulHTTPError, Rule(None, 500, status_attr="http_status", message_attr="message",
                             summary="Admission control and the like; the class carries its own status")),
    (VLLMValidationError, Rule(_C, 400, _BAD, parameter_attr="parameter",
                               summary="Invalid or incompatible request parameter (value never echoed)")),
    (VLLMUnprocessableEntityError, Rule(_C, 422, "UnprocessableEntityError", parameter_attr="parameter",
                                        summary="Inaccessible or undecodable request media")),
    (LoRAAdapterNotFoundError, Rule(_C, 404, "NotFoundError", message_attr="message",
                                    summary="LoRA adapter not found")),
    (VLLMNotFoundError, Rule(_C, 404, "NotFoundError", summary="Missing model, LoRA, voice, job or artifact")),
    (_since_vllm_031("ChatTemplateResolutionError"), Rule(_C, 400, _BAD,
                                                          summary="Chat template could not be resolved")),
    (VLLMClientError, Rule(_C, 400, _BAD, summary="Any other client-caused error")),
    (_since_vllm_031("RetryableRequestError"), Rule(_S, 503, "ServiceUnavailableError", status_attr="status_code",
                                 summary="Transient request failure, safe to retry")),
    (GenerationError, Rule(_S, 500, _ISE, status_attr="status_code",
                           summary="finish_reason reported an internal error")),
    (EngineDeadError, Rule(_S, 500, _ISE, public_message=_DEAD, fatal=True, summary="Unrecoverable engine failure")),
    (EngineGenerateError, Rule(_S, 500, _ISE, summary="Recoverable per-request engine failure")),
    (VLLMServerError, Rule(_S, 500, _ISE, summary="Any other server-caused error")),
    (VLLMError, Rule(_S, 500, _ISE, summary="A vLLM error outside the client/server split")),
    # Framework errors.
    (RequestValidationError, Rule(_C, 400, _BAD, extract=_validation_summary,
                                  summary="Request body failed schema validation (inputs never echoed)")),
    (HTTPException, Rule(None, 500, status_attr="status_code", message_attr="detail",
                         summary="Starlette/FastAPI HTTPException; its own status")),
    # Fatal device and compiler failures, recognised by type, never by message text.
    (torch.OutOfMemoryError, Rule(_S, 500, _ISE, public_message=_DEAD, fatal=True,
                                  summary="Device out of memory (also torch.cuda.OutOfMemoryError)")),
    (_inductor_error(), Rule(_S, 500, _ISE, public_message=_DEAD, fatal=True,
                             summary="torch.compile / Inductor failure")),
    # omni_errors' own errors are internal even though they derive from ValueError.
    (OmniErrorsError, Rule(_S, 500, _ISE, summary="omni_errors' own error (codec, record)")),
    (asyncio.TimeoutError, Rule(_S, 504, "GatewayTimeoutError", stage_deadline=True,
                                summary="A wait on a stage expired (only with a stage_id; otherwise 500)")),
    # vLLM's migration fallbacks for raw types, behind the switch.
    (ValueError, Rule(_C, 400, _BAD, raw_fallback=True, summary="Raw ValueError (fallback; off: 500)")),
    (TypeError, Rule(_C, 400, _BAD, raw_fallback=True, summary="Raw TypeError (fallback; off: 500)")),
    (OverflowError, Rule(_C, 400, _BAD, raw_fallback=True, summary="Raw OverflowError (fallback; off: 500)")),
    (jinja2.TemplateError, Rule(_C, 400, _BAD, raw_fallback=True,
                                summary="Chat template rendering failed (vLLM's fallback; off: 500)")),
    (NotImplementedError, Rule(_S, 501, "NotImplementedError", raw_fallback=True,
                               summary="Raw NotImplementedError (fallback; off: 500)")),
    # The safety net.
    (BaseException, Rule(_S, 500, _ISE, summary="Anything else")),
]
# fmt: on

RULES: Mapping[type[BaseException], Rule] = {cls: rule for cls, rule in _ROWS if cls is not None}
"""The classification table, in catalogue order (most specific first)."""

# Classes of packages this module must not import (vLLM-Omni imports vLLM and patches it), keyed by
# "module.QualName" and matched along the MRO like RULES: an instance can only exist once its
# module is loaded, so looking the name up costs nothing and imports nothing.
# fmt: off
NAMED_RULES: Mapping[str, Rule] = {
    "vllm_omni.errors.OmniClientError": Rule(
        None, 400, status_attr="status_code", message_attr="message", type_attr="error_type",
        summary="vLLM-Omni 0.30's client error (guardrails included): its own status and type"),
    "vllm_omni.entrypoints.omni_base.OmniEngineDeadError": Rule(
        _S, 500, _ISE, public_message=_DEAD, stage_attr="error_stage_id", fatal=True,
        summary="vLLM-Omni 0.30's fatal stage failure (`error_stage_id`)"),
}
# fmt: on

_raw_fallbacks = True


def set_raw_fallbacks(enabled: bool) -> None:
    """Turn vLLM's raw `ValueError`/`TypeError`/`OverflowError`/`NotImplementedError` fallback on or off.

    On (the default, as in vLLM 0.33): 400/400/400/501. Off: they are unknown failures, 500.
    """
    global _raw_fallbacks
    _raw_fallbacks = bool(enabled)


def raw_fallbacks_enabled() -> bool:
    """Whether the raw-exception fallback is on."""
    return _raw_fallbacks


_RULE_CACHE: dict[tuple[type[BaseException], bool, bool], Rule] = {}


def rule_for(cls: type[BaseException], *, raw_fallbacks: bool = True, stage_known: bool = False) -> Rule:
    """The first rule along `cls.__mro__`, skipping fallback rows when they are off."""
    key = (cls, raw_fallbacks, stage_known)
    cached = _RULE_CACHE.get(key)
    if cached is not None:
        return cached
    for base in cls.__mro__:
        rule = RULES.get(base) or NAMED_RULES.get(f"{base.__module__}.{base.__qualname__}")
        if rule is None or (rule.raw_fallback and not raw_fallbacks) or (rule.stage_deadline and not stage_known):
            continue
        if len(_RULE_CACHE) < 4096:  # bounded: classes can be created at runtime
            _RULE_CACHE[key] = rule
        return rule
    return RULES[BaseException]  # pragma: no cover - BaseException is in every exception's MRO


def _status_of(exc: BaseException, rule: Rule) -> tuple[Category, int]:
    status = rule.status
    if rule.status_attr is not None:
        value = getattr(exc, rule.status_attr, None)
        if isinstance(value, int):
            status = int(value)
    if rule.category is not None:
        low = 400 if rule.category == "client" else 500
        return rule.category, status if low <= status < low + 100 else rule.status
    if 400 <= status < 500:
        return "client", status
    if 500 <= status < 600:
        return "server", status
    return "server", 500  # a "status" that is not an error status is a server bug


def _own_type(exc: BaseException, rule: Rule) -> str | None:
    value = getattr(exc, rule.type_attr, None) if rule.type_attr else None
    if not isinstance(value, str):
        return None
    if value.isascii() and value.isidentifier() and len(value) <= 64:
        return value
    return identifier(value)[:64] or None


def _message_of(exc: BaseException, rule: Rule) -> tuple[str, str | None]:
    parameter = getattr(exc, rule.parameter_attr, None) if rule.parameter_attr else None
    if rule.extract is not None:
        return rule.extract(exc)
    if rule.public_message is not None:
        message: object = rule.public_message
    elif rule.message_attr is not None and getattr(exc, rule.message_attr, None) is not None:
        message = getattr(exc, rule.message_attr)
    elif exc.args and isinstance(exc.args[0], str):
        # args[0], not str(exc): VLLMValidationError.__str__ appends the rejected value.
        message = exc.args[0]
    else:
        message = str(exc)
    return str(message), parameter if isinstance(parameter, str) else None


def _build(
    message: str,
    category: Category,
    status: int,
    error_type: str,
    fatal: bool,
    fields: dict[str, Any],  # parameter and request_id (str), stage_id (int), each optional
) -> OmniErrorDetails:
    """Construct a record; an optional field that breaks a limit is dropped rather than failing the error path."""
    for _ in range(len(fields) + 2):
        try:
            return OmniErrorDetails(message, category, status, error_type, fatal=fatal, **fields)
        except InvalidRecordError as exc:
            if exc.field in fields and fields[exc.field] is not None:
                fields[exc.field] = None
                continue
            raise
        except UnicodeError:
            message = message.encode("utf-8", "replace").decode("utf-8")
    raise AssertionError("unreachable")  # pragma: no cover


def classify(
    exc: BaseException,
    *,
    request_id: str | None = None,
    stage_id: int | None = None,
    raw_fallbacks: bool | None = None,
) -> OmniErrorDetails:
    """The canonical record of `exc`.

    Args:
        exc: any exception.
        request_id: the request it failed, if known; kept unless the record already has one.
        stage_id: the stage it came from, if known; an id the exception carries takes precedence.
            Passing it also marks a raw `asyncio.TimeoutError` as a stage deadline (504).
        raw_fallbacks: override the module switch (`set_raw_fallbacks`) for this call.

    Returns:
        A validated, sanitized record. Unknown exceptions are server 500; this never raises for a
        well-formed `exc`, whatever its text.
    """
    fallbacks = _raw_fallbacks if raw_fallbacks is None else raw_fallbacks
    rule = rule_for(type(exc), raw_fallbacks=fallbacks, stage_known=stage_id is not None)
    if rule.carrier:
        carried = getattr(exc, "details", None)
        if isinstance(carried, OmniErrorDetails):
            return _with_context(carried, request_id, stage_id)
        if type(exc) in (OmniClientError, OmniServerError):  # pragma: no cover - they always carry one
            rule = rule_for(type(exc).__mro__[1])
    category, status = _status_of(exc, rule)
    error_type = rule.error_type or _own_type(exc, rule) or type_for_status(status)
    try:
        message, parameter = _message_of(exc, rule)
    except Exception:  # a broken __str__ or attribute must not break the error path
        message, parameter = "", None
    if not message.strip():
        message = phrase(status)
    own_stage = getattr(exc, rule.stage_attr, None) if rule.stage_attr else None
    fields: dict[str, str | int | None] = {
        "parameter": parameter,
        "request_id": request_id,
        "stage_id": own_stage if isinstance(own_stage, int) else stage_id,
    }
    return _build(message, category, status, error_type, rule.fatal and category == "server", fields)


def _with_context(details: OmniErrorDetails, request_id: str | None, stage_id: int | None) -> OmniErrorDetails:
    changes: dict[str, str | int] = {}
    if details.request_id is None and request_id is not None:
        changes["request_id"] = request_id
    if details.stage_id is None and stage_id is not None:
        changes["stage_id"] = stage_id
    if not changes:
        return details
    try:
        return details.replace(**changes)
    except InvalidRecordError:
        return details


class _CallableModule(types.ModuleType):
    """`omni_errors.classify` names both this module and its function.

    Importing the submodule makes Python set the package attribute to the module, which would hide
    the function; calling the module therefore calls the function, whichever import came first.
    """

    def __call__(self, exc: BaseException, /, **kwargs: Any) -> OmniErrorDetails:
        return classify(exc, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
