"""The record on vLLM-Omni's own `ErrorMessage` (the orchestrator's and the membership
controller's): a subclass with a `details` field (`record_message_class`); one built from flat
fields only gets its record from them. A failed stage output's record is `omni_errors.carry`'s
`output_record`.

vLLM-Omni answers the requests of a dead replica with `fatal=True` whether or not its stage has
another replica; a fatal answer ends the server. Inside `stage_serves_on()` (the orchestrator's
eviction of one replica of a stage that keeps a live one) such a message gets the core's
`replica_lost_record` instead: 503, not fatal, so that vLLM-Omni's per-replica isolation holds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from omni_errors import OmniErrorDetails
from omni_errors.semantics.core_table import replica_lost_record
from omni_errors.semantics.legacy import from_error_message, to_legacy

__all__ = [
    "error_message_class",
    "message_record",
    "other_replica_lives",
    "record_message_class",
    "stage_serves_on",
]

#: Whether the messages built now answer requests of a lost replica whose stage serves on.
_serves_on: ContextVar[bool] = ContextVar("omni_errors_stage_serves_on", default=False)


@contextlib.contextmanager
def stage_serves_on(serves_on: bool = True) -> Iterator[None]:
    """Inside: the fatal answers built are those of a lost replica whose stage serves on (the current
    task only: a context variable)."""
    token = _serves_on.set(serves_on)
    try:
        yield
    finally:
        _serves_on.reset(token)


def other_replica_lives(pool: Any, replica_id: int | None) -> bool:
    """Whether the stage of `pool` (a `StagePool`) has a live replica other than `replica_id`."""
    return replica_id is not None and any(live != replica_id for live in pool.live_replica_ids())


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
            if self.details is not None:
                return
            if self.fatal and _serves_on.get():  # a lost replica's answer: its flat fields say so too
                self.details = replica_lost_record(stage_id=self.stage_id, request_id=self.request_id)
                for name, value in to_legacy(self.details, kind="message").items():
                    setattr(self, name, value)
                return
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
