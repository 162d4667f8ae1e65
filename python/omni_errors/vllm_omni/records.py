"""The record on vLLM-Omni's own messages and outputs (the carriers themselves are
`omni_errors.carry`'s):

- the orchestrator's and the membership controller's `ErrorMessage`: a subclass with a `details`
  field (`record_message_class`); one built from flat fields only gets its record from them;
- a failed stage output, whichever peer produced it (`output_record`).
"""

from __future__ import annotations

from typing import Any

from omni_errors._native import OmniErrorDetails
from omni_errors.carry import Carried, carried, stage_failure
from omni_errors.semantics.core_table import stage_failure_record
from omni_errors.semantics.ids import with_ids
from omni_errors.semantics.legacy import from_error_message, from_legacy, is_request_error, to_legacy

__all__ = [
    "error_message_class",
    "message_record",
    "output_record",
    "record_message_class",
]


def _request_error(output: Any) -> Any:
    """vLLM's `RequestError` on an `EngineCoreOutput` (`.error`, vLLM >= 0.31), if there is one."""
    error = getattr(output, "error", None)
    return error if is_request_error(error) else None


def output_record(output: Any, *, request_id: str | None, stage_id: int | None, error: str | None = None) -> Carried:
    """The record of a failed stage output, whichever peer produced it.

    In order: the record a plugin-enabled stage attached; vLLM's `RequestError` (LLM stages on
    vLLM >= 0.31); the 0.30 flat fields (`error`/`error_status_code`/`error_type`, or `error`, the
    text of an LLM stage's `FinishReason.ERROR`), read by `omni_errors.semantics.legacy`.
    """
    value = carried(output)
    if value is not None:
        return Carried(with_ids(value.details, request_id=request_id, stage_id=stage_id), value.exit_code)
    request_error = _request_error(output)
    if request_error is not None:
        return stage_failure(request_error.to_exception(), request_id=request_id, stage_id=stage_id)
    if error is not None:  # an LLM stage's FinishReason.ERROR: only text, so a server failure
        flat: Any = {"error": error, "status_code": getattr(output, "error_status_code", None)}
    else:
        flat = output
    details = from_legacy(flat, request_id=request_id, stage_id=stage_id)
    if details is None:  # an error output without text or status
        details = stage_failure_record(request_id=request_id, stage_id=stage_id)
    return Carried(details)


_message_classes: dict[type, Any] = {}


def record_message_class(error_message: type) -> Any:
    """The `ErrorMessage` subclass carrying `details` (one per `ErrorMessage` class)."""
    cls = _message_classes.get(error_message)
    if cls is not None:
        return cls

    class RecordErrorMessage(error_message, kw_only=True):  # type: ignore[misc, call-arg]
        """vLLM-Omni's `ErrorMessage` with the canonical record; the flat fields stay for 0.30 readers."""

        details: Any = None

        def __post_init__(self) -> None:
            if self.details is None:
                self.details = _from_flat(self)

        @classmethod
        def of(cls, details: OmniErrorDetails) -> Any:
            return cls(**to_legacy(details, kind="message"), details=details)

    _message_classes[error_message] = RecordErrorMessage
    return RecordErrorMessage


def error_message_class() -> Any:
    """The record-carrying subclass of `vllm_omni.engine.messages.ErrorMessage` (the original class)."""
    from vllm_omni.engine.messages import ErrorMessage

    return record_message_class(ErrorMessage)


def _from_flat(message: Any) -> OmniErrorDetails:
    return from_error_message(message)  # the same reader vLLM-Omni's own `ErrorMessage` uses (upstream series)


def message_record(message: Any) -> OmniErrorDetails:
    """The record of any `ErrorMessage`: as carried, else read from its 0.30 flat fields."""
    details = getattr(message, "details", None)
    return details if isinstance(details, OmniErrorDetails) else _from_flat(message)
