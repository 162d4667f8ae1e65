# vLLM's GracefulHTTPError subclasses have an untyped __init__:
# mypy: disable-error-code="no-untyped-call"
"""classify(): one row per exception type of the RFC tables and vLLM's hierarchy."""

from __future__ import annotations

import asyncio
import json
from http import HTTPStatus

import omni_errors
import pytest
import torch
import vllm.exceptions
from fastapi import HTTPException
from fastapi.exceptions import RequestValidationError
from omni_errors import DecodeError, OmniErrorDetails
from omni_errors.semantics.classification import RULES, classify, rule_for
from omni_errors.semantics.core_table import DEAD_MESSAGE
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
from omni_errors.semantics.http_status import type_for_status
from torch._inductor.exc import InductorError
from vllm.exceptions import (
    GenerationError,
    LoRAAdapterNotFoundError,
    MaxQueuedTokensError,
    QueueOverflowError,
    VLLMClientError,
    VLLMNotFoundError,
    VLLMServerError,
    VLLMUnprocessableEntityError,
    VLLMValidationError,
)
from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

DEAD = DEAD_MESSAGE
# vLLM >= 0.31 only; on vLLM 0.30 (the vLLM-Omni environment) their rows have nothing to match.
ChatTemplateResolutionError = getattr(vllm.exceptions, "ChatTemplateResolutionError", None)
ProfilerAlreadyActiveError = getattr(vllm.exceptions, "ProfilerAlreadyActiveError", None)
RetryableRequestError = getattr(vllm.exceptions, "RetryableRequestError", None)
# vLLM >= 0.34 only: a faulted engine awaiting recovery, retryable, never fatal.
EngineFaultedError = getattr(vllm.exceptions, "EngineFaultedError", None)

# (exception, category, status, error_type, parameter, message, stage_id, fatal)
# fmt: off
CASES: list[tuple[BaseException, str, int, str, str | None, str, int | None, bool]] = [
    (VLLMValidationError("bad temperature", parameter="temperature", value=-1), "client", 400, "BadRequestError",
     "temperature", "bad temperature", None, False),
    (VLLMUnprocessableEntityError("cannot decode image", parameter="image_url"), "client", 422,
     "UnprocessableEntityError", "image_url", "cannot decode image", None, False),
    (VLLMNotFoundError("model x does not exist"), "client", 404, "NotFoundError", None, "model x does not exist",
     None, False),
    (LoRAAdapterNotFoundError("sql", "adapters"), "client", 404, "NotFoundError", None,
     "Loading lora sql failed: No adapter found for adapters", None, False),
    *([(ChatTemplateResolutionError("no chat template"), "client", 400, "BadRequestError", None, "no chat template",
        None, False)] if ChatTemplateResolutionError else []),
    (VLLMClientError("client fault"), "client", 400, "BadRequestError", None, "client fault", None, False),
    (QueueOverflowError(), "server", 503, "ServiceUnavailableError", None, QueueOverflowError().message, None, False),
    (MaxQueuedTokensError(), "server", 503, "ServiceUnavailableError", None, MaxQueuedTokensError().message, None,
     False),
    *([(ProfilerAlreadyActiveError(), "client", 409, "ConflictError", None, ProfilerAlreadyActiveError().message, None,
        False)] if ProfilerAlreadyActiveError else []),
    (GenerationError(), "server", 500, "InternalServerError", None, "Internal server error", None, False),
    *([(RetryableRequestError(), "server", 503, "ServiceUnavailableError", None, "Request failed; please retry", None,
        False)] if RetryableRequestError else []),
    *([(EngineFaultedError(), "server", 503, "ServiceUnavailableError", None, EngineFaultedError().message, None,
        False)] if EngineFaultedError else []),
    (EngineGenerateError("generate failed"), "server", 500, "InternalServerError", None, "generate failed", None,
     False),
    (EngineDeadError(), "server", 500, "InternalServerError", None, DEAD, None, True),
    (VLLMServerError("server fault"), "server", 500, "InternalServerError", None, "server fault", None, False),
    (GuardrailViolationError("blocked by policy", parameter="messages"), "client", 400, "BadRequestError", "messages",
     "blocked by policy", None, False),
    (OmniConflictError("job is running"), "client", 409, "ConflictError", None, "job is running", None, False),
    (OmniNotImplementedError("no streaming here"), "server", 501, "NotImplementedError", None, "no streaming here",
     None, False),
    (OmniServiceUnavailableError("stage 2 is down", stage_id=2), "server", 503, "ServiceUnavailableError", None,
     "stage 2 is down", 2, False),
    (OmniStageTimeoutError("stage 1 deadline", stage_id=1), "server", 504, "GatewayTimeoutError", None,
     "stage 1 deadline", 1, False),
    (OmniEngineGenerateError("vocoder failed", stage_id=3), "server", 500, "InternalServerError", None,
     "vocoder failed", 3, False),
    (OmniEngineDeadError(stage_id=4), "server", 500, "InternalServerError", None, DEAD, 4, True),
    (OmniClientError("too large", status_code=413, error_type="RequestEntityTooLargeError"), "client", 413,
     "RequestEntityTooLargeError", None, "too large", None, False),
    (OmniServerError("stage crashed", stage_id=5), "server", 500, "InternalServerError", None, "stage crashed", 5,
     False),
    (HTTPException(404), "client", 404, "NotFoundError", None, "Not Found", None, False),
    (HTTPException(429, "slow down"), "client", 429, "TooManyRequestsError", None, "slow down", None, False),
    (HTTPException(503, "draining"), "server", 503, "ServiceUnavailableError", None, "draining", None, False),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "server", 500, "InternalServerError",
     None, DEAD, None, True),
    (torch.cuda.OutOfMemoryError("out of memory"), "server", 500, "InternalServerError", None, DEAD, None, True),
    (InductorError(RuntimeError("triton compile failed"), None), "server", 500, "InternalServerError", None, DEAD,
     None, True),
    (ValueError("raw value"), "client", 400, "BadRequestError", None, "raw value", None, False),
    (TypeError("raw type"), "client", 400, "BadRequestError", None, "raw type", None, False),
    (OverflowError("raw overflow"), "client", 400, "BadRequestError", None, "raw overflow", None, False),
    (NotImplementedError("raw not implemented"), "server", 501, "NotImplementedError", None, "raw not implemented",
     None, False),
    (KeyError("unknown"), "server", 500, "InternalServerError", None, "unknown", None, False),
    (RuntimeError(), "server", 500, "InternalServerError", None, "Internal Server Error", None, False),
    (DecodeError("bad frame"), "server", 500, "InternalServerError", None, "bad frame", None, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: type(c[0]).__name__)
def test_classify_table(case: tuple[BaseException, str, int, str, str | None, str, int | None, bool]) -> None:
    exc, category, status, error_type, parameter, message, stage_id, fatal = case
    d = classify(exc, request_id="req-1")
    assert (d.category, d.status_code, d.error_type, d.parameter, d.stage_id, d.fatal) == (
        category, status, error_type, parameter, stage_id, fatal,
    )
    assert d.message == message
    assert d.request_id == "req-1"


def test_rejected_value_is_never_stored() -> None:
    d = classify(VLLMValidationError("bad", parameter="api_key", value="sk-live-SECRETVALUE123"))
    assert "SECRETVALUE" not in repr(d) and "SECRETVALUE" not in str(d.to_dict())


def test_request_validation_error_never_echoes_inputs() -> None:
    errors = [
        {"type": "float_parsing", "loc": ("body", "temperature"), "msg": "Input should be a valid number",
         "input": "hunter2-SECRET"},
        {"type": "missing", "loc": ("body", "model"), "msg": "Field required", "input": {}},
    ]
    d = classify(RequestValidationError(errors))
    # The record's parameter normaliser drops FastAPI's "body." location prefix, as OpenAI's `param` does.
    assert (d.category, d.status_code, d.error_type, d.parameter) == ("client", 400, "BadRequestError", "temperature")
    assert "hunter2" not in d.message
    assert d.message.startswith("2 validation errors:")
    assert "body.model: Field required" in d.message


def test_malformed_json_body_says_where_and_what() -> None:
    # FastAPI's own error for a body json.loads refused: the offset in `loc`, the parser's reason, the body.
    body = '{"model": "omni-tiny",\n "messages": [,]}'
    with pytest.raises(json.JSONDecodeError) as parsed:
        json.loads(body)
    e = parsed.value  # the line and column json itself counts
    error = {"type": "json_invalid", "loc": ("body", e.pos), "msg": "JSON decode error", "input": {},
             "ctx": {"error": e.msg}}
    d = classify(RequestValidationError([error], body=body))
    assert (d.category, d.status_code, d.error_type, d.parameter) == ("client", 400, "BadRequestError", "body")
    assert (e.lineno, e.colno, e.pos) == (2, 15, 37)
    assert d.message == "The request body is not valid JSON: Expecting value at line 2, column 15 (character 37)"
    d = classify(RequestValidationError([error]))  # no body kept: the offset alone
    assert d.message == "The request body is not valid JSON: Expecting value at character 37"


def test_raw_fallbacks_keyword() -> None:
    assert classify(ValueError("x"), raw_fallbacks=False).status_code == 500
    assert classify(NotImplementedError("x"), raw_fallbacks=False).status_code == 500
    d = classify(ValueError("unknown internal"), raw_fallbacks=False)
    assert (d.category, d.status_code, d.error_type) == ("server", 500, "InternalServerError")
    # Semantic types are unaffected by the keyword.
    assert classify(VLLMValidationError("x"), raw_fallbacks=False).status_code == 400
    assert classify(ValueError("x")).status_code == 400


def test_timeout_is_504_only_at_a_stage_deadline() -> None:
    d = classify(asyncio.TimeoutError(), stage_id=2)
    assert (d.category, d.status_code, d.error_type, d.stage_id) == ("server", 504, "GatewayTimeoutError", 2)
    assert classify(asyncio.TimeoutError()).status_code == 500


def test_oom_is_fatal_by_type_not_by_text() -> None:
    assert not classify(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")).fatal
    assert classify(torch.OutOfMemoryError("anything")).fatal

    class MyOOM(torch.OutOfMemoryError):
        pass

    assert classify(MyOOM("x")).fatal


def test_subclass_inherits_parent_row() -> None:
    class MissingVoice(VLLMNotFoundError):
        pass

    assert classify(MissingVoice("no voice")).status_code == 404
    assert rule_for(MissingVoice) is RULES[VLLMNotFoundError]


def test_exception_stage_id_wins_and_kwargs_fill_gaps() -> None:
    assert classify(OmniEngineGenerateError("x", stage_id=1), stage_id=7).stage_id == 1
    assert classify(EngineGenerateError("x"), stage_id=7).stage_id == 7
    d = OmniErrorDetails("m", "client", 400, "BadRequestError")
    assert classify(OmniClientError.from_details(d), request_id="r", stage_id=2) == d.replace(request_id="r",
                                                                                            stage_id=2)


def test_out_of_range_context_is_dropped_not_raised() -> None:
    d = classify(EngineGenerateError("x"), request_id="r" * 1000, stage_id=10**6)
    assert (d.request_id, d.stage_id, d.status_code) == (None, None, 500)


def test_non_error_http_status_is_a_server_error() -> None:
    d = classify(HTTPException(302, "moved"))
    assert (d.category, d.status_code) == ("server", 500)


def test_type_for_status() -> None:
    assert type_for_status(HTTPStatus.NOT_FOUND) == "NotFoundError"
    assert type_for_status(HTTPStatus.INTERNAL_SERVER_ERROR) == "InternalServerError"
    assert type_for_status(499) == "BadRequestError"
    assert type_for_status(599) == "InternalServerError"


def test_package_level_names_resolve_lazily() -> None:
    assert omni_errors.classify(KeyError("x")).status_code == 500
    assert omni_errors.OmniClientError is OmniClientError
    with pytest.raises(AttributeError):
        _ = omni_errors.does_not_exist


def test_jinja_template_error_is_a_raw_fallback() -> None:
    import jinja2

    assert classify(jinja2.TemplateSyntaxError("unexpected end", 1)).status_code == 400
    assert classify(jinja2.TemplateSyntaxError("unexpected end", 1), raw_fallbacks=False).status_code == 500


def test_broken_str_does_not_break_classification() -> None:
    class Broken(Exception):
        def __str__(self) -> str:
            raise RuntimeError("no text")

    d = classify(Broken())
    assert (d.category, d.status_code, d.message) == ("server", 500, "Internal Server Error")


def test_unencodable_text_is_replaced_not_raised() -> None:
    d = classify(ValueError("bad \ud800 surrogate"))
    assert d.status_code == 400 and "surrogate" in d.message
