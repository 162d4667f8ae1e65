"""The record on vLLM-Omni's own `ErrorMessage` (the orchestrator's and the membership
controller's): a subclass with a `details` field (`record_message_class`); one built from flat
fields only gets its record from them. A failed stage output's record is `omni_errors.carry`'s
`output_record`.
"""

from __future__ import annotations

from typing import Any

from omni_errors._native import OmniErrorDetails
from omni_errors.semantics.legacy import from_error_message, to_legacy

__all__ = [
    "error_message_class",
    "message_record",
    "record_message_class",
]


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
