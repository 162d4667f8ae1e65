"""How the record rides vLLM-Omni's own carriers, and how a failure on the stage side becomes one.

Carriers (each keeps its 0.30 flat fields, filled from the record, so a peer without the plugin
reads what it always read):

- `DiffusionOutput`, `OmniRequestOutput`: attribute `omni_error` holding a `Carried` (pickled with
  the dataclass: it crosses the diffusion worker's shared-memory queue as one compact frame);
- diffusion proc error frames (msgpack dicts): top-level keys `omni_error` (the record's frame
  bytes) and `omni_error_exit` (the exit code a fatal failure implies); old receivers ignore them;
- the orchestrator's and the membership controller's `ErrorMessage`: a subclass with a `details`
  field (`record_message_class`); one built from flat fields only gets its record from them.

Raw fallbacks on the stage side are off: a `ValueError` raised inside a stage is a server failure
(500), never a client error. Only explicit client types (vLLM's `VLLMClientError` family,
vLLM-Omni's `OmniClientError`) become 4xx there.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from omni_errors._native import OmniErrorDetails, decode, encode
from omni_errors.errors import DecodeError
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.fatal.policy import fatal_cause
from omni_errors.semantics.core_table import fatal_record, stage_failure_record
from omni_errors.semantics.ids import with_ids
from omni_errors.semantics.legacy import from_error_message, from_legacy, is_request_error, to_legacy
from omni_errors.vllm_omni.settings import LOG_NAME

__all__ = [
    "EXIT_KEY",
    "FRAME_KEY",
    "RECORD_ATTR",
    "Carried",
    "attach",
    "carried",
    "error_message_class",
    "frame_fields",
    "message_record",
    "output_record",
    "record_message_class",
    "stage_failure",
]

_log = logging.getLogger(LOG_NAME)

RECORD_ATTR = "omni_error"
FRAME_KEY = "omni_error"
EXIT_KEY = "omni_error_exit"


@dataclass(frozen=True, slots=True)
class Carried:
    """A record on its way, and for a fatal one the exit code it implies (81 OOM, 80 otherwise)."""

    details: OmniErrorDetails
    exit_code: ExitCode | None = None


def stage_failure(exc: BaseException, *, request_id: str | None = None, stage_id: int | None = None) -> Carried:
    """The record of `exc` raised on the stage side: no raw fallbacks, fatal by type along its chain."""
    from omni_errors.semantics.classification import classify

    details = classify(exc, request_id=request_id, stage_id=stage_id, raw_fallbacks=False)
    cause = fatal_cause(exc)
    if cause is None and not details.fatal:
        return Carried(details)
    if not details.fatal:  # a fatal type wrapped by a library (seed 003): the chain decides
        details = fatal_record(stage_id=details.stage_id, request_id=details.request_id)
    code = cause[1] if cause is not None else ExitCode.FATAL_ENGINE
    return Carried(details, code)


_ignored_lock = threading.Lock()
_ignored_logged = False


def _peer_exit_code(value: object) -> ExitCode | None:
    """The exit code a peer's frame names, or None; a value that is not a documented code (a newer
    release's, a malformed frame's) is ignored, and said once per process."""
    global _ignored_logged
    code = ExitCode.parse(value)
    if code is None and value is not None:
        with _ignored_lock:
            first, _ignored_logged = not _ignored_logged, True
        if first:
            _log.warning(
                "omni-errors: ignored an exit code that is not a documented one in a peer's frame: %.40r", value
            )
    return code


def attach(carrier: Any, value: Carried) -> None:
    """Put the record on an output and fill its 0.30 flat fields from it (sanitized text included)."""
    setattr(carrier, RECORD_ATTR, value)
    legacy = to_legacy(value.details, kind="output")
    for name in ("error", "error_status_code", "error_type"):
        if hasattr(carrier, name):
            setattr(carrier, name, legacy[name])


def carried(carrier: Any) -> Carried | None:
    """The `Carried` on an output or in a frame dict, if a plugin-enabled peer put one there."""
    if isinstance(carrier, dict):
        raw = carrier.get(FRAME_KEY)
        if not isinstance(raw, (bytes, bytearray, memoryview)):
            return None
        try:
            details = decode(raw)
        except DecodeError:
            return None
        code = _peer_exit_code(carrier.get(EXIT_KEY)) if details.fatal else None
        return Carried(details, code)
    value = getattr(carrier, RECORD_ATTR, None)
    return value if isinstance(value, Carried) else None


def frame_fields(value: Carried) -> dict[str, Any]:
    """The keys a diffusion error frame gets: the record, its exit code, and the flat fields from it."""
    fields: dict[str, Any] = {
        "error": value.details.message,
        "status_code": value.details.status_code,
        "error_type": value.details.error_type,
        FRAME_KEY: encode(value.details),
    }
    if value.exit_code is not None:
        fields[EXIT_KEY] = int(value.exit_code)  # msgpack writes a plain int
    return fields


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
