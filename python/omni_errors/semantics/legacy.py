"""vLLM-Omni 0.30's flat error carriers, read into records and written back for older peers.

Compatibility window: these carriers sent only a status, so their category is inferred from it
(`omni_errors.semantics.http_status.category_for_status`: 400-499 -> client, 500-599 -> server, anything
else -> server 500); nothing better exists for their frames. Everywhere else, ownership comes
from `category`.
The reader stays for the 0.31 and 0.32 releases (one release after every stage speaks the record
frame, per the RFC's "one compatibility window"); it is removed in 0.33, together with `to_legacy`.

Carriers read:

- `ErrorMessage(error, status_code, error_type, fatal, request_id, stage_id)` (stage IPC;
  `from_error_message` gives the record of one built without it);
- `OmniRequestOutput` / `DiffusionOutput` with `error`, `error_status_code`, `error_type`;
- diffusion frames `{"type": "error", "error": ..., "status_code": ..., "error_type": ...}`;
- vLLM's `RequestError(code, message, retryable)`, through vLLM's own `to_exception()`.

Reading flat fields imports nothing heavy; only a vLLM `RequestError` loads the classifier.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from omni_errors._native import OmniErrorDetails
from omni_errors.semantics.http_status import category_for_status, error_type_for
from omni_errors.semantics.rules import build_record

__all__ = ["LegacyKind", "from_error_message", "from_legacy", "is_request_error", "to_legacy"]

LegacyKind = Literal["message", "output", "frame"]

_MISSING = object()


def _field(carrier: object, *names: str) -> Any:
    """The first present, non-None field among `names`, from a mapping or an object."""
    for name in names:
        if isinstance(carrier, Mapping):
            value = carrier.get(name, _MISSING)
        else:
            value = getattr(carrier, name, _MISSING)
        if value is not _MISSING and value is not None:
            return value
    return None


def is_request_error(carrier: object) -> bool:
    """Whether `carrier` is vLLM's `RequestError` (vLLM >= 0.31), read through its `to_exception()`.

    Recognised by name and module, never imported: a process that holds one has vLLM loaded."""
    return (
        type(carrier).__name__ == "RequestError"
        and type(carrier).__module__.startswith("vllm")
        and callable(getattr(carrier, "to_exception", None))
    )


def from_legacy(
    carrier: object, /, *, request_id: str | None = None, stage_id: int | None = None
) -> OmniErrorDetails | None:
    """The record for a 0.30 carrier, or None when it carries no error.

    Args:
        carrier: an `OmniErrorDetails` (returned as is), a mapping (diffusion frame or an
            `ErrorMessage`/output as a dict), vLLM's `RequestError`, or an object with the flat fields.
        request_id: used when the carrier has none.
        stage_id: used when the carrier has none.

    The category is inferred from the status (see the module docstring); `fatal` is honoured only
    for server errors; an `error_type` that is not an identifier is normalised ("Bad Request" ->
    "BadRequestError"); oversized optional fields are dropped.
    """
    if isinstance(carrier, OmniErrorDetails):
        return carrier
    if is_request_error(carrier):
        from omni_errors.semantics.classification import classify

        # to_exception() gives vLLM's own classes, so the raw-type fallbacks never apply.
        exc = carrier.to_exception()  # type: ignore[attr-defined]
        return classify(exc, request_id=request_id, stage_id=stage_id, raw_fallbacks=False)
    if isinstance(carrier, Mapping) and "category" in carrier:
        return OmniErrorDetails.from_dict(dict(carrier))  # already a record, as `to_dict()` wrote it
    if isinstance(carrier, Mapping) and carrier.get("type") not in (None, "error"):
        return None  # a diffusion frame of another kind
    error = _field(carrier, "error", "message")
    status_raw = _field(carrier, "status_code", "error_status_code")
    if error is None and status_raw is None:
        return None
    category, status = category_for_status(_status(status_raw))
    raw_type = _field(carrier, "error_type")
    return build_record(
        str(error) if error is not None else "",
        category,
        status,
        error_type_for(str(raw_type) if raw_type is not None else None, status),
        fatal=category == "server" and bool(_field(carrier, "fatal")),
        request_id=_field(carrier, "request_id") or request_id,
        stage_id=_int_or_none(_field(carrier, "stage_id"), stage_id),
        parameter=_field(carrier, "parameter", "param"),
    )


def from_error_message(message: object, /) -> OmniErrorDetails:
    """The record of a vLLM-Omni `ErrorMessage` built from its flat fields only (never None).

    A `fatal` message is the canonical fatal record (`omni_errors.semantics.core_table.fatal_record`,
    with the message's `stage_id` and `request_id`): its text was written for logs, and every
    client of a dead pipeline reads the same public text. Otherwise the flat fields are read as
    `from_legacy` reads them; a message with neither text nor status is the generic stage failure.
    vLLM-Omni's `ErrorMessage.__post_init__` (the upstream series) and the plugin's record-carrying
    `ErrorMessage` both fill their `details` with it.
    """
    from omni_errors.semantics.core_table import fatal_record, stage_failure_record

    request_id, stage_id = _field(message, "request_id"), _field(message, "stage_id")
    if _field(message, "fatal"):
        return fatal_record(stage_id=stage_id, request_id=request_id)
    details = from_legacy(message)
    if details is None:  # an error message without text or status
        return stage_failure_record(request_id=request_id, stage_id=stage_id)
    return details


def _status(value: object) -> int:
    if isinstance(value, bool):
        return 500
    if isinstance(value, int):
        return value
    if isinstance(value, (str, float)):
        try:
            return int(value)
        except ValueError:
            return 500
    return 500


def _int_or_none(value: object, default: int | None) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return default
    return value


def to_legacy(details: OmniErrorDetails, *, kind: LegacyKind = "message") -> dict[str, Any]:
    """The flat fields a 0.30 peer reads.

    Args:
        details: the record.
        kind: "message" -> `ErrorMessage` fields (error, status_code, error_type, fatal,
            request_id, stage_id); "output" -> `OmniRequestOutput`/`DiffusionOutput` fields (error,
            error_status_code, error_type); "frame" -> a diffusion error frame.

    Parameter and category do not survive: a 0.30 reader re-infers the category from the status.
    """
    if kind == "message":
        return {
            "error": details.message,
            "status_code": details.status_code,
            "error_type": details.error_type,
            "fatal": details.fatal,
            "request_id": details.request_id,
            "stage_id": details.stage_id,
        }
    if kind == "output":
        return {
            "error": details.message,
            "error_status_code": details.status_code,
            "error_type": details.error_type,
        }
    if kind == "frame":
        return {
            "type": "error",
            "error": details.message,
            "status_code": details.status_code,
            "error_type": details.error_type,
        }
    why = f"kind must be one of 'message', 'output', 'frame', got {kind!r}"
    raise ValueError(why)  # omni-errors: ignore[OE101]: a caller's wrong argument, never served
