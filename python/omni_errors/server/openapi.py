"""The error contract in a FastAPI app's OpenAPI document: every status an operation can answer,
each with the one `ErrorResponse` schema, the envelope `omni_errors.render.error_info` writes.

- `error_responses(*statuses)` is a route's `responses=`: the statuses that route itself answers;
- `job_responses()` is a job route's 200: the job object, whose `error` is the record once the job
  failed (`omni_errors.render.jobs.job_metadata`; docs/errors.md, "Async jobs");
- `document_errors(app, every_operation=...)` makes `app.openapi()` add the statuses every
  operation can answer (the safety net's 500, a body limit's 413), those an operation whose path
  names a resource can answer (`templated`: 404, it does not exist), and the schema, and replace
  FastAPI's automatic 422 `HTTPValidationError`, which these handlers never send: a request that
  fails validation is answered 400 with the record (`RequestValidationError`'s rule).

The schema is the record's public fields and their bounds, so a client generated from the
document (openapi-python-client, datamodel-code-generator) parses every error the server sends.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, get_args

from omni_errors._native import (
    MAX_ERROR_TYPE_LEN,
    MAX_MESSAGE_LEN,
    MAX_PARAMETER_LEN,
    MAX_REQUEST_ID_LEN,
    MAX_STAGE_ID,
)
from omni_errors.render.jobs import JobStatus
from omni_errors.semantics.http_status import phrase

__all__ = ["ERROR_SCHEMAS", "JOB_SCHEMAS", "document_errors", "error_responses", "job_responses"]

_REF = "#/components/schemas/ErrorResponse"
_JOB_REF = "#/components/schemas/Job"
_FASTAPI_422 = "#/components/schemas/HTTPValidationError"
_FASTAPI_SCHEMAS = ("HTTPValidationError", "ValidationError")

#: The envelope's component schemas: what `error_info` renders, no more (`additionalProperties: false`).
ERROR_SCHEMAS: dict[str, dict[str, Any]] = {
    "ErrorResponse": {
        "title": "ErrorResponse",
        "description": "Every error answer: HTTP status == error.code.",
        "type": "object",
        "properties": {"error": {"$ref": "#/components/schemas/ErrorInfo"}},
        "required": ["error"],
        "additionalProperties": False,
    },
    "ErrorInfo": {
        "title": "ErrorInfo",
        "description": "The error record's public fields (sanitized: no paths, tracebacks, addresses or secrets).",
        "type": "object",
        "properties": {
            "message": {"type": "string", "maxLength": MAX_MESSAGE_LEN},
            "type": {"type": "string", "maxLength": MAX_ERROR_TYPE_LEN, "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"},
            "param": {"anyOf": [{"type": "string", "maxLength": MAX_PARAMETER_LEN}, {"type": "null"}]},
            "code": {"type": "integer", "minimum": 400, "maximum": 599},
            "request_id": {"type": "string", "maxLength": MAX_REQUEST_ID_LEN},
            "stage_id": {"type": "integer", "minimum": 0, "maximum": MAX_STAGE_ID},
        },
        "required": ["message", "type", "param", "code"],
        "additionalProperties": False,
    },
}


#: The job object `omni_errors.render.jobs.job_metadata` writes; added where a route declares it.
JOB_SCHEMAS: dict[str, dict[str, Any]] = {
    "Job": {
        "title": "Job",
        "description": "An async job. A failed one embeds its error record (read with 200).",
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "object": {"type": "string", "enum": ["job"]},
            "status": {"type": "string", "enum": list(get_args(JobStatus))},
            "created_at": {"type": "integer"},
            "error": {"anyOf": [{"$ref": "#/components/schemas/ErrorInfo"}, {"type": "null"}]},
        },
        "required": ["id", "object", "status", "created_at", "error"],
        "additionalProperties": False,
    },
}


def job_responses() -> dict[int | str, dict[str, Any]]:
    """A job route's `responses=`: its 200, the `Job` object (`document_errors` adds the schema)."""
    return {200: {"description": "The job", "content": {"application/json": {"schema": {"$ref": _JOB_REF}}}}}


def error_responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """A route's `responses=`: each status answered with an `ErrorResponse`."""
    return {status: _error_response(status) for status in statuses}


def _error_response(status: int) -> dict[str, Any]:
    return {"description": phrase(status), "content": {"application/json": {"schema": {"$ref": _REF}}}}


def document_errors(
    app: Any,
    *,
    every_operation: Iterable[int] = (500,),
    templated: Iterable[int] = (),
    operations: Mapping[tuple[str, str], Iterable[int]] | None = None,
) -> None:
    """Make `app.openapi()` (FastAPI) state the error contract.

    Args:
        app: the FastAPI application, whose routes are all included.
        every_operation: statuses any operation can answer (the safety net's 500 at least).
        templated: more statuses for an operation whose path has a parameter (`/v1/videos/{video_id}`).
        operations: more statuses per `(METHOD, path)`, for routes whose `responses=` are not ours.
    """
    generate = app.openapi
    extra = {(method.lower(), path): tuple(s) for (method, path), s in (operations or {}).items()}
    common = tuple(every_operation)
    named = tuple(templated)

    def openapi() -> dict[str, Any]:
        document: dict[str, Any] = generate()
        for path, item in document.get("paths", {}).items():
            for method, operation in item.items():
                if isinstance(operation, dict) and "responses" in operation:
                    own = (*extra.get((method, path), ()), *(named if "{" in path else ()))
                    _declare(operation["responses"], (*common, *own))
        schemas = document.setdefault("components", {}).setdefault("schemas", {})
        schemas.update(ERROR_SCHEMAS)
        if _JOB_REF in json.dumps(document["paths"]):
            schemas.update(JOB_SCHEMAS)
        if _FASTAPI_422 not in json.dumps(document["paths"]):
            for name in _FASTAPI_SCHEMAS:
                schemas.pop(name, None)
        return document

    app.openapi = openapi


def _declare(responses: dict[str, Any], statuses: Iterable[int]) -> None:
    fastapi_422 = responses.get("422", {}).get("content", {}).get("application/json", {}).get("schema", {})
    if fastapi_422.get("$ref") == _FASTAPI_422:  # validation fails as 400 with the record, never 422
        del responses["422"]
        statuses = (*statuses, 400)
    for status in statuses:
        responses.setdefault(str(status), _error_response(status))
