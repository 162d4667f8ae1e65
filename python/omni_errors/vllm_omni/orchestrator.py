"""The orchestrator (API process, its own thread): error messages carry the record; a dead pipeline ends.

- `RecordErrorMessage`, an `ErrorMessage` with a `details` field, replaces `ErrorMessage` in the
  orchestrator module, so every error the orchestrator emits carries a record; one built from
  flat fields only (dead replicas, lost CFG companions...) gets its record from them.
- `_handle_stage_error` reads the stage's record, vLLM's `RequestError` (LLM stages), or the 0.30
  flat fields (a stage without the plugin), keeping `stage_id`, `parameter` and `request_id`.
- `_handle_dead_replica` keeps vLLM-Omni's per-replica eviction; when a stage has no live replica
  left, or a record is fatal, the pipeline ends: every in-flight request is answered with the
  fatal record, the orchestrator shuts its stages down, and the process is told how it must exit.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import Any

from omni_errors._native import OmniErrorDetails
from omni_errors.core_table import fatal_record, stage_failure_record
from omni_errors.errors import InvalidRecordError
from omni_errors.legacy import from_legacy, to_legacy
from omni_errors.lifecycle.exitcodes import ExitCode
from omni_errors.lifecycle.failures import canonical_fatal
from omni_errors.vllm_omni import fatal
from omni_errors.vllm_omni.records import output_record

__all__ = [
    "fail_pipeline",
    "make_error_message",
    "make_handle_dead_replica",
    "make_handle_stage_error",
    "message_record",
    "record_message_class",
]

_log = logging.getLogger("omni_errors.vllm_omni")

_classes: dict[type, Any] = {}


def record_message_class(error_message: type) -> Any:
    """The `ErrorMessage` subclass carrying `details` (one per `ErrorMessage` class)."""
    cls = _classes.get(error_message)
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

    _classes[error_message] = RecordErrorMessage
    return RecordErrorMessage


def _from_flat(message: Any) -> OmniErrorDetails:
    if message.fatal:
        return fatal_record(stage_id=message.stage_id, request_id=message.request_id)
    details = from_legacy(message)
    if details is None:  # an error message without text or status
        return stage_failure_record(request_id=message.request_id, stage_id=message.stage_id)
    return details


def message_record(message: Any) -> OmniErrorDetails:
    """The record of any `ErrorMessage`: as carried, else read from its 0.30 flat fields."""
    details = getattr(message, "details", None)
    return details if isinstance(details, OmniErrorDetails) else _from_flat(message)


async def fail_pipeline(orchestrator: Any, details: OmniErrorDetails, code: ExitCode, message_cls: Any) -> None:
    """Answer every in-flight request with `details`, stop the orchestrator, declare the process fatal."""
    if fatal.declared() is not None:
        return
    details = canonical_fatal(details)
    # Declared before any request is answered: the API process renders those answers as fatal,
    # and the cause decided here (a lost stage, say) must be the exit code, not their echo.
    fatal.declare(details, code)
    request_ids = list(orchestrator.request_states)
    for request_id in request_ids:
        await orchestrator.output_async_queue.put(message_cls.of(details.replace(request_id=request_id)))
    if request_ids:
        await orchestrator._cleanup_request_ids(request_ids, abort=False, release_owners=True)
    from vllm_omni.engine.messages import ShutdownRequestMessage

    await orchestrator.request_async_queue.put(ShutdownRequestMessage())  # the orchestrator's own stop path


def _message_cls() -> Any:
    from vllm_omni.engine.messages import ErrorMessage  # the original: the orchestrator's is replaced

    return record_message_class(ErrorMessage)


def make_error_message(module: ModuleType, original: type) -> Any:
    """The orchestrator builds `RecordErrorMessage`s: every error it emits carries a record."""
    return record_message_class(original)


def make_handle_stage_error(module: ModuleType, original: Any) -> Any:
    """`OrchestratorBase._handle_stage_error`: the stage's record reaches the client; a fatal one ends the pipeline."""
    message_cls = _message_cls()

    async def _handle_stage_error(self: Any, stage_id: int, output: Any, *, error: str | None = None) -> None:
        tracker = self._cfg_tracker
        parent_id = output.request_id
        if tracker.is_companion(output.request_id):
            parent_id = tracker.get_parent_id(output.request_id) or output.request_id
        value = output_record(output, request_id=parent_id, stage_id=stage_id, error=error)
        details = value.details
        if details.request_id != parent_id:  # a CFG companion failed: its parent is what the client sent
            try:
                details = details.replace(request_id=parent_id)
            except InvalidRecordError:
                details = details.replace(request_id=None)
        await self.output_async_queue.put(message_cls.of(details))
        await self._cleanup_request_ids(
            [parent_id, *tracker.cleanup_parent(parent_id)], abort=True, release_owners=True
        )
        if details.fatal:
            code = ExitCode(value.exit_code) if value.exit_code is not None else ExitCode.FATAL_ENGINE
            await fail_pipeline(self, details, code, message_cls)

    return _handle_stage_error


def make_handle_dead_replica(module: ModuleType, original: Any) -> Any:
    """`OrchestratorBase._handle_dead_replica`: a stage without a live replica ends the pipeline."""
    message_cls = _message_cls()

    async def _handle_dead_replica(self: Any, stage_id: int, replica_id: int, error: Any) -> None:
        await original(self, stage_id, replica_id, error)
        pool = self.stage_pools[stage_id]
        if pool.live_replica_ids():
            return  # other replicas keep serving (vLLM-Omni's per-replica fault isolation)
        carried_details = getattr(error, "details", None)
        code = ExitCode.FATAL_ENGINE if isinstance(carried_details, OmniErrorDetails) else ExitCode.STAGE_LOST
        _log.critical("omni-errors: stage-%s has no live replica left; ending the pipeline", stage_id)
        details = fatal_record(stage_id=stage_id)
        await fail_pipeline(self, details, code, message_cls)

    return _handle_dead_replica
