"""Non-streaming HTTP: the envelope with HTTP status == `error.code`, never an error body with 200."""

from __future__ import annotations

from starlette.responses import JSONResponse

from omni_errors._native import OmniErrorDetails
from omni_errors.render import error_body

__all__ = ["http_response"]


def http_response(details: OmniErrorDetails, *, headers: dict[str, str] | None = None) -> JSONResponse:
    """A JSON response whose status is the record's `status_code`."""
    return JSONResponse(error_body(details), status_code=details.status_code, headers=headers)
