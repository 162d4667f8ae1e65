"""Connector tombstones: a sender that fails a request tells the stage waiting for its payload.

vLLM-Omni 0.30 never tells a receiver that its sender failed: the sync receiver waits
`retry_seconds` (2 s) and then fails as "Stage payload unavailable", the async-chunk poller polls
until the head aborts the request, and a send given up after its retries reaches only the
sender's own error sink. Here the sender puts the record's frame (`encode`) as a *tombstone*
under the receiver's own connector key, `{request}_{from_stage}_{chunk}`, and the receiver fails
with that record as soon as it reads the key.

- `OmniSerde.serialize` / `deserialize` (the `OmniSerializer` every connector uses): a
  `Tombstone` travels as its bare frame, and is read back from the bytes the connector read (for
  `SharedMemoryConnector`, vLLM-Omni's own one open, copy and unlink of the segment);
- the model runners' payload transport: `recv_stage_payload` raises the rebuilt record;
  `_poll_single_request` stops polling for that request and keeps its record
  (`failed_requests`); `_requeue_or_drop_failed_send` puts a tombstone when it gives up.

A tombstone is told from a real payload by its first byte, then its 16-byte header (`peek`):
payloads are msgpack documents (`OmniSerializer`), and a msgpack document that starts with the
frame's magic byte 0x4F (the fixint 79) is one byte long, while a frame is at least 24 bytes and
its header states its exact length.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from omni_errors._native import OmniErrorDetails, decode, encode, peek
from omni_errors.carry import stage_failure
from omni_errors.errors import DecodeError
from omni_errors.semantics.core_table import stage_failure_record
from omni_errors.semantics.exceptions import rebuild
from omni_errors.semantics.ids import with_ids
from omni_errors.vllm_omni.settings import LOG_NAME

__all__ = [
    "FAILURES_ATTR",
    "Tombstone",
    "failed_requests",
    "make_cleanup_finished_request",
    "make_deserialize",
    "make_poll_single_request",
    "make_recv_ordinary_stage_result",
    "make_recv_stage_payload",
    "make_requeue_or_drop_failed_send",
    "make_serialize",
    "put_tombstone",
    "tombstone_from",
]

_log = logging.getLogger(LOG_NAME)

#: Attribute of a payload transport holding `{request_id: record}` for requests its poller failed.
FAILURES_ATTR = "omni_errors_failed_requests"

_MAGIC = 0x4F  # a frame's first byte ("OE", docs/wire-format.md)
_MIN_FRAME_LEN = 24  # header 16, two empty strings 2 + 2, checksum 4


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What a receiver gets instead of the payload of a request its sender failed."""

    details: OmniErrorDetails


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


def put_tombstone(connector: Any, from_stage: str, to_stage: str, key: str, details: OmniErrorDetails) -> bool:
    """Put `details` under `key` for the stage that awaits it; False (logged) if the connector refuses."""
    try:
        success, _size, _metadata = connector.put(from_stage, to_stage, key, Tombstone(details))
    except Exception:  # omni-errors: ignore[OE202]: logged; telling the receiver must never add a second failure
        _log.exception("omni-errors: could not put the tombstone %s", key)
        return False
    if not success:
        _log.error("omni-errors: %s refused the tombstone %s", type(connector).__name__, key)
    return bool(success)


def failed_requests(transport: Any) -> Mapping[str, OmniErrorDetails]:
    """The requests whose sender failed, as the async poller of `transport` found them."""
    failures: dict[str, OmniErrorDetails] = getattr(transport, FAILURES_ATTR, {})
    return failures


class _SenderFailedError(Exception):
    """Raised by the connector read inside `_poll_single_request`, caught by its wrapper."""

    def __init__(self, tombstone: Tombstone) -> None:
        super().__init__(tombstone.details.message)
        self.tombstone = tombstone


def _fail_polled_request(transport: Any, req_id: str, details: OmniErrorDetails) -> None:
    with transport._lock:
        transport._pending_load_reqs.pop(req_id, None)
        failures = transport.__dict__.setdefault(FAILURES_ATTR, {})
        failures[req_id] = details
    _log.error(
        "omni-errors: the sender of request %s failed it (%s %s); no longer waiting for its payload",
        req_id,
        details.status_code,
        details.error_type,
    )


def _give_up_record(transport: Any, task: Mapping[str, Any], cause: BaseException | None) -> OmniErrorDetails:
    stage_id = getattr(transport, "_stage_id", None)
    request_id = task.get("request_id")
    if cause is None:
        return stage_failure_record(stage_id=stage_id, request_id=request_id)
    return stage_failure(cause, request_id=request_id, stage_id=stage_id).details


# --- the factories: `(module, original) -> replacement`, one per entry in `manifest.TARGETS` ----
# `OmniSerde.serialize`/`deserialize` (`...utils.serialization`) carry tombstones for every connector:
# each serializes through the one `OmniSerializer`, directly (Mooncake and Yuanrong transfer
# engines, MORI) or through `OmniConnectorBase.serialize_obj` (shared memory, Mooncake store,
# Yuanrong, NIXL). Its other users never meet a frame: a frame is not a msgpack document.


def make_serialize(module: ModuleType, serialize: Any) -> Any:
    """`OmniSerde.serialize`: a `Tombstone` becomes its bare frame."""

    def serialize_tombstones(self: Any, obj: Any, /) -> bytes:
        if isinstance(obj, Tombstone):
            return encode(obj.details)
        result: bytes = serialize(self, obj)
        return result

    return serialize_tombstones


def make_deserialize(module: ModuleType, deserialize: Any) -> Any:
    """`OmniSerde.deserialize`: a frame becomes a `Tombstone`."""

    def deserialize_tombstones(self: Any, data: Any, /) -> Any:
        return tombstone_from(data) or deserialize(self, data)

    return deserialize_tombstones


def make_recv_stage_payload(module: ModuleType, original: Any) -> Any:
    """The sync receiver raises the rebuilt record instead of returning a tombstone as the payload."""

    def recv_stage_payload(self: Any, external_req_id: str, /, *args: Any, **kwargs: Any) -> Any:
        payload = original(self, external_req_id, *args, **kwargs)
        if isinstance(payload, Tombstone):
            raise rebuild(with_ids(payload.details, request_id=external_req_id, stage_id=None))
        return payload

    return recv_stage_payload


def make_recv_ordinary_stage_result(module: ModuleType, original: Any) -> Any:
    """The poller's connector read: a tombstone leaves `_poll_single_request` as `_SenderFailedError`."""

    def _recv_ordinary_stage_result(self: Any, /, *args: Any, **kwargs: Any) -> Any:
        result = original(self, *args, **kwargs)
        if isinstance(result, tuple) and result and isinstance(result[0], Tombstone):
            raise _SenderFailedError(result[0])
        return result

    return _recv_ordinary_stage_result


def make_poll_single_request(module: ModuleType, original: Any) -> Any:
    """The poller stops waiting for a request whose sender failed, and keeps its record."""

    def _poll_single_request(self: Any, req_id: str, /, *args: Any, **kwargs: Any) -> bool:
        try:
            progressed: bool = original(self, req_id, *args, **kwargs)
        except _SenderFailedError as failed:
            _fail_polled_request(self, req_id, failed.tombstone.details)
            return True
        return progressed

    return _poll_single_request


def make_requeue_or_drop_failed_send(module: ModuleType, original: Any) -> Any:
    """The sender's give-up branch also puts a tombstone under the key it could not fill."""

    def _requeue_or_drop_failed_send(self: Any, task: dict[str, Any], /, *args: Any, **kwargs: Any) -> None:
        gives_up = isinstance(task.get("request_id"), str) and (
            task.get("_retry_count", 0) + 1 > self._MAX_SEND_RETRIES
        )
        cause = kwargs.get("error") or task.get("_last_send_error")
        original(self, task, *args, **kwargs)
        if gives_up and self._omni_connector is not None:
            details = _give_up_record(self, task, cause)
            put_tombstone(
                self._omni_connector, str(task["stage_id"]), str(task["next_stage_id"]), task["put_key"], details
            )

    return _requeue_or_drop_failed_send


def make_cleanup_finished_request(module: ModuleType, original: Any) -> Any:
    """A finished request's kept record goes with the rest of its state."""

    def cleanup_finished_request(self: Any, req_id: str, /, *args: Any, **kwargs: Any) -> None:
        original(self, req_id, *args, **kwargs)
        getattr(self, FAILURES_ATTR, {}).pop(req_id, None)

    return cleanup_finished_request
