"""Non-streaming HTTP: the envelope with HTTP status == `error.code`, never an error body with 200.

The record says what failed; the headers say how to go on, and they come from the exception, not
the record: an `HTTPException`'s own headers (`Allow` on Starlette's 405, `WWW-Authenticate` on a
401, whatever a route set) and `Retry-After` from an exception's `retry_after` seconds. Every 503
carries `Retry-After`: the exception's own value, else a short hint (`RETRY_AFTER_S`, the one
source: `settings.RETRY_AFTER`, read once), so that a client or proxy that honours it neither
hammers nor gives up. Starlette is imported on first use: the command line reads `RETRY_AFTER_S`
for its help.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from omni_errors._native import OmniErrorDetails
from omni_errors.render import error_body
from omni_errors.settings import RETRY_AFTER

if TYPE_CHECKING:
    from starlette.responses import JSONResponse

__all__ = ["RETRY_AFTER_S", "http_response", "response_headers", "retry_after_header"]

#: Seconds a 503 tells the client to wait when the failure does not say (whole seconds).
RETRY_AFTER_S = math.ceil(RETRY_AFTER.read())

# The body is the envelope: its framing headers are the response's own, never an exception's.
_BODY_HEADERS = frozenset({"content-length", "content-type", "content-encoding", "transfer-encoding"})


def response_headers(exc: BaseException) -> dict[str, str]:
    """The headers `exc` asks its error response to carry (`Allow`, `WWW-Authenticate`, `Retry-After`, ...).

    Only Starlette's `HTTPException` (FastAPI's subclasses it) is trusted with headers: another
    exception's `.headers` may be a remote server's (an HTTP client's error), which are not ours to send.
    """
    from starlette.exceptions import HTTPException

    headers: dict[str, str] = {}
    if isinstance(exc, HTTPException) and isinstance(exc.headers, Mapping):
        headers = {str(k): str(v) for k, v in exc.headers.items() if str(k).lower() not in _BODY_HEADERS}
    if own := retry_after_header(exc):
        headers = {k: v for k, v in headers.items() if k.lower() != "retry-after"} | own
    return headers


def retry_after_header(exc: BaseException) -> dict[str, str]:
    """`Retry-After` for an exception that says when to retry (a positive whole `retry_after`), else {}."""
    seconds = getattr(exc, "retry_after", None)
    if isinstance(seconds, int) and not isinstance(seconds, bool) and seconds > 0:
        return {"Retry-After": str(seconds)}
    return {}


def http_response(
    details: OmniErrorDetails,
    *,
    headers: Mapping[str, str] | None = None,
    retry_after_s: int = RETRY_AFTER_S,
) -> JSONResponse:
    """A JSON response whose status is the record's `status_code`, with `headers`; a 503 without
    `Retry-After` among them gets `retry_after_s`."""
    from starlette.responses import JSONResponse

    out = dict(headers or {})
    if details.status_code == 503 and not any(k.lower() == "retry-after" for k in out):
        out["Retry-After"] = str(retry_after_s)
    return JSONResponse(error_body(details), status_code=details.status_code, headers=out or None)
