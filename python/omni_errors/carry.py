"""How a record rides a carrier it does not own, and how a failure on the stage side becomes one.

vLLM-Omni's carriers keep their 0.30 flat fields, filled from the record, so a peer without
omni-errors reads what it always read:

- an output (`DiffusionOutput`, `OmniRequestOutput`): attribute `omni_error` (`RECORD_ATTR`) holding
  a `Carried` (pickled with the dataclass: it crosses the diffusion worker's shared-memory queue as
  one compact frame);
- a msgpack dict frame (the diffusion proc's error frames): top-level keys `omni_error`
  (`FRAME_KEY`, the record's frame bytes) and `omni_error_exit` (`EXIT_KEY`, the exit code a fatal
  failure implies); old receivers ignore them;
- a msgspec array struct (an LLM stage's engine-core outputs): trailing fields of the same names,
  holding the same values; old receivers decode the struct without them.

Raw fallbacks on the stage side are off: a `ValueError` raised inside a stage is a server failure
(500), never a client error. Only explicit client types (vLLM's `VLLMClientError` family,
vLLM-Omni's `OmniClientError`) become 4xx there.

A *tombstone* (`Tombstone`) is the record in place of a payload: a sender that gives up a request
puts it under the key its receiver reads (vLLM-Omni's connectors: `{request}_{from_stage}_{chunk}`),
and the receiver fails with that record (`Tombstone.error`) instead of waiting for a payload that
will not come. It travels as the record's bare frame (`Tombstone.frame`), and `tombstone_from` tells
it from a real payload by its first byte, then its 16-byte header (`peek`): payloads are msgpack
documents, and a msgpack document that starts with the frame's magic byte 0x4F (the fixint 79) is
one byte long, while a frame is at least 24 bytes and its header states its exact length.

The orchestrator reads a failed stage output's record with `output_record`, whichever peer sent it
(an omni-errors stage's record, vLLM's `RequestError`, or the 0.30 flat fields), and what a lost
replica died of with `died_of`.

The writers and readers are vLLM-Omni's own code (the upstream series) or the plugin's patches:
both call these, so each side reads what the other wrote. A fatal failure's exit code is noted in
the process's fatal state (`omni_errors.fatal.process`) where it is first seen (`record_failure`).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from omni_errors._native import OmniErrorDetails, decode, encode, peek
from omni_errors.errors import DecodeError
from omni_errors.fatal import process
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.fatal.policy import classify_failure, fatal_cause
from omni_errors.semantics.core_table import fatal_record, stage_failure_record
from omni_errors.semantics.ids import with_ids
from omni_errors.semantics.legacy import from_legacy, is_request_error, to_legacy

__all__ = [
    "EXIT_KEY",
    "FRAME_KEY",
    "RECORD_ATTR",
    "Carried",
    "Tombstone",
    "attach",
    "carried",
    "death_notice",
    "died_of",
    "failure_frame_fields",
    "frame_fields",
    "hung_notice",
    "output_record",
    "record_failure",
    "stage_failure",
    "tombstone_from",
]

_log = logging.getLogger(__name__)

RECORD_ATTR = "omni_error"
FRAME_KEY = "omni_error"
EXIT_KEY = "omni_error_exit"

_MAGIC = 0x4F  # a frame's first byte ("OE", docs/wire-format.md)
_MIN_FRAME_LEN = 24  # header 16, two empty strings 2 + 2, checksum 4


@dataclass(frozen=True, slots=True)
class Carried:
    """A record on its way, and for a fatal one the exit code it implies (81 OOM, 80 otherwise)."""

    details: OmniErrorDetails
    exit_code: ExitCode | None = None


def stage_failure(exc: BaseException, *, request_id: str | None = None, stage_id: int | None = None) -> Carried:
    """The record of `exc` raised on the stage side (the one rule: `classify_failure`), fatal by type
    along its chain."""
    details = classify_failure(exc, request_id=request_id, stage_id=stage_id)
    cause = fatal_cause(exc)
    if cause is None and not details.fatal:
        return Carried(details)
    if not details.fatal:  # a fatal type wrapped by a library (seed 003): the chain decides
        details = fatal_record(stage_id=details.stage_id, request_id=details.request_id)
    code = cause[1] if cause is not None else ExitCode.FATAL_ENGINE
    return Carried(details, code)


def record_failure(exc: BaseException, *, request_id: str | None = None, stage_id: int | None = None) -> Carried | None:
    """`stage_failure`, for the code that handles the failure: a fatal one's exit code is noted in
    this process's fatal state, and a failure to classify is logged and gives None (classifying
    must never turn one failure into two)."""
    try:
        value = stage_failure(exc, request_id=request_id, stage_id=stage_id)
    except Exception:
        _log.exception("omni-errors: could not classify %s", type(exc).__name__)
        return None
    if value.exit_code is not None:
        process.note(value.exit_code)
    return value


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
    """The `Carried` on an output or in a frame dict, if an omni-errors peer put one there (an
    output's attribute may also hold the record's bare frame: an LLM stage's engine-core output)."""
    if isinstance(carrier, dict):
        return _from_frame(carrier.get(FRAME_KEY), carrier.get(EXIT_KEY))
    value = getattr(carrier, RECORD_ATTR, None)
    if isinstance(value, Carried):
        return value
    return _from_frame(value, getattr(carrier, EXIT_KEY, None))


def _from_frame(raw: object, exit_code: object) -> Carried | None:
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        return None
    try:
        details = decode(raw)
    except DecodeError:
        return None
    return Carried(details, _peer_exit_code(exit_code) if details.fatal else None)


def output_record(output: Any, *, request_id: str | None, stage_id: int | None, error: str | None = None) -> Carried:
    """The record of a failed stage output, whichever peer produced it (what the orchestrator answers).

    In order: the record an omni-errors stage attached (`carried`); vLLM's `RequestError` (LLM
    stages on vLLM >= 0.31, `.error`); the 0.30 flat fields (`error`/`error_status_code`/`error_type`,
    or `error`, the text of an LLM stage's `FinishReason.ERROR`), read by `omni_errors.semantics.legacy`.
    """
    value = carried(output)
    if value is not None:
        return Carried(with_ids(value.details, request_id=request_id, stage_id=stage_id), value.exit_code)
    request_error: Any = getattr(output, "error", None)  # vLLM's `RequestError` (vLLM >= 0.31), or text
    if is_request_error(request_error):
        return stage_failure(request_error.to_exception(), request_id=request_id, stage_id=stage_id)
    if error is not None:  # an LLM stage's FinishReason.ERROR: only text, so a server failure
        flat: Any = {"error": error, "status_code": getattr(output, "error_status_code", None)}
    else:
        flat = output
    details = from_legacy(flat, request_id=request_id, stage_id=stage_id)
    if details is None:  # an error output without text or status
        details = stage_failure_record(request_id=request_id, stage_id=stage_id)
    return Carried(details)


def died_of(
    said: Carried | None, *, stage_id: int | None, remote: bool, error: object = None
) -> tuple[OmniErrorDetails, ExitCode]:
    """What a lost replica died of, and the exit code that implies for its pipeline.

    What the replica said (its proc's death notice or last fatal record, 80 when that names no code;
    86 for a remote one); else, for a remote replica, its lost link (86); else 80 when the error that
    reported the loss carried a record (a dead engine), and 85 when the replica vanished without a word.
    """
    if said is not None:
        return said.details, said.exit_code or (ExitCode.LINK_LOST if remote else ExitCode.FATAL_ENGINE)
    if remote:
        code = ExitCode.LINK_LOST
    elif isinstance(getattr(error, "details", None), OmniErrorDetails):
        code = ExitCode.FATAL_ENGINE
    else:
        code = ExitCode.STAGE_LOST
    return fatal_record(stage_id=stage_id), code


def death_notice(exc: BaseException | None) -> Carried:
    """What an engine that dies of `exc` says it died of, and its exit code: `exc`'s record when it is
    fatal by type (81 for an OOM anywhere in its chain), else the canonical fatal record with 80 (any
    exception that escapes an engine loop ends the engine). The code is noted in this process's
    fatal state (an OOM seen earlier is not hidden by a later dead engine)."""
    value = record_failure(exc) if exc is not None else None
    if value is None or not value.details.fatal:
        value = Carried(fatal_record(stage_id=None), ExitCode.FATAL_ENGINE)
    return Carried(value.details, process.note(value.exit_code or ExitCode.FATAL_ENGINE))


def hung_notice() -> Carried:
    """What an engine that ends itself because a step ran past its deadline
    (`omni_errors.fatal.step_deadline`) says it died of: the canonical fatal record with 84, noted in
    this process's fatal state (a cause seen earlier, an OOM, still wins)."""
    return Carried(fatal_record(stage_id=None), process.note(ExitCode.STAGE_HUNG))


def failure_frame_fields(exc: BaseException, *, request_id: str | None = None) -> dict[str, Any]:
    """The keys an error frame gets for `exc`, handled where the frame is built: its record
    (`record_failure`), and for a fatal one the exit code that wins in this process so far (the
    fatal policy: an OOM seen earlier is not hidden by a later dead engine); none when `exc` cannot
    be classified, so the frame keeps its flat fields alone."""
    value = record_failure(exc, request_id=request_id)
    if value is None:
        return {}
    if value.details.fatal:
        value = Carried(value.details, process.note(value.exit_code or ExitCode.FATAL_ENGINE))
    return frame_fields(value)


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


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What a receiver gets instead of the payload of a request its sender failed."""

    details: OmniErrorDetails

    @classmethod
    def of(
        cls, cause: BaseException | None, *, request_id: str | None = None, stage_id: int | None = None
    ) -> Tombstone:
        """The tombstone a sender puts when it gives up: the record of its last error (`stage_failure`,
        not noted as fatal: the sender's process carries on), or the generic stage failure without one."""
        if cause is None:
            return cls(stage_failure_record(stage_id=stage_id, request_id=request_id))
        return cls(stage_failure(cause, request_id=request_id, stage_id=stage_id).details)

    def frame(self) -> bytes:
        """The bytes a connector stores: the record's bare frame (`encode`)."""
        return encode(self.details)

    def error(self, *, request_id: str | None = None) -> Exception:
        """What the receiver raises: the rebuilt record (`rebuild`), answering `request_id` if the
        record has no request id of its own."""
        from omni_errors.semantics.exceptions import rebuild

        return rebuild(with_ids(self.details, request_id=request_id, stage_id=None))


def tombstone_from(payload: object) -> Tombstone | None:
    """The tombstone `payload` holds (bytes, bytearray or memoryview), or None for a real payload.

    A real payload costs one length test and one byte comparison. A frame whose header is valid
    but whose body is not (torn, corrupted) still means a failed sender: its record is the
    generic stage failure, with the stage id the header gives.
    """
    if not isinstance(payload, (bytes, bytearray, memoryview)) or len(payload) < _MIN_FRAME_LEN:
        return None
    if payload[0] != _MAGIC:
        return None
    try:
        header = peek(payload)
    except DecodeError:
        return None
    if header.frame_len != len(payload):
        return None
    try:
        return Tombstone(decode(payload))
    except DecodeError:
        return Tombstone(stage_failure_record(stage_id=header.stage_id))
