"""The request and stage ids a record carries: one bound for request ids, and the only ways to set them.

A request id comes from a client (a header, a job id) or from a peer, and a record holds at most
`MAX_REQUEST_ID_LEN` UTF-8 bytes of it. The routes accept an id only if it fits (`request_id_fits`),
and every place that puts an id on an existing record goes through `with_request_id` or `with_ids`,
which leave an id out rather than raise: they run on the paths that answer failures, where an
`InvalidRecordError` would turn an answer into a second failure.
"""

from __future__ import annotations

from omni_errors._native import MAX_REQUEST_ID_LEN, MAX_STAGE_ID, OmniErrorDetails

__all__ = ["request_id_fits", "with_ids", "with_request_id"]


def request_id_fits(request_id: str) -> bool:
    """Whether a record can carry `request_id`: valid UTF-8 of at most `MAX_REQUEST_ID_LEN` bytes."""
    if len(request_id) > MAX_REQUEST_ID_LEN:  # refused without encoding a multi-megabyte id
        return False
    try:
        return len(request_id.encode()) <= MAX_REQUEST_ID_LEN
    except UnicodeEncodeError:  # a lone surrogate is not UTF-8
        return False


def with_request_id(details: OmniErrorDetails, request_id: str | None) -> OmniErrorDetails:
    """`details` answering request `request_id` (None: no request); an id that does not fit is left out."""
    if request_id is not None and not request_id_fits(request_id):
        request_id = None
    return details if details.request_id == request_id else details.replace(request_id=request_id)


def with_ids(details: OmniErrorDetails, *, request_id: str | None, stage_id: int | None) -> OmniErrorDetails:
    """`details` with the request and stage ids it lacks; ids it already has are kept, and one that
    does not fit is left out."""
    if details.request_id is None and request_id is not None:
        details = with_request_id(details, request_id)
    if details.stage_id is None and stage_id is not None and 0 <= stage_id <= MAX_STAGE_ID:
        details = details.replace(stage_id=stage_id)
    return details
