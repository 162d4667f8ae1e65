"""Connector tombstones: a sender that fails a request tells the stage waiting for its payload.

vLLM-Omni 0.30 never tells a receiver that its sender failed: the sync receiver waits
`retry_seconds` (2 s) and then fails as "Stage payload unavailable", the async-chunk poller polls
until the head aborts the request, and a send given up after its retries reaches only the
sender's own error sink. Here the sender puts a *tombstone* (`omni_errors.carry.Tombstone`: the
record's frame in place of the payload) under the receiver's own connector key,
`{request}_{from_stage}_{chunk}`, and the receiver fails with that record as soon as it reads the
key.

- `OmniSerde.serialize` / `deserialize` (the `OmniSerializer` every connector uses): a
  `Tombstone` travels as its bare frame, and is read back from the bytes the connector read (for
  `SharedMemoryConnector`, vLLM-Omni's own one open, copy and unlink of the segment);
- the model runners' payload transport: `recv_stage_payload` raises the rebuilt record;
  `_poll_single_request` stops polling for that request and keeps its record
  (`failed_requests`); `_requeue_or_drop_failed_send` puts a tombstone when it gives up.

The tombstone itself, its frame and how a payload is told from it are the core's
(`omni_errors.carry`), which vLLM-Omni's own code calls too (the upstream series).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from omni_errors import OmniErrorDetails
from omni_errors.carry import Tombstone, tombstone_from

from omni_errors_vllm_omni.settings import LOG_NAME

__all__ = [
    "FAILURES_ATTR",
    "failed_requests",
    "make_cleanup_finished_request",
    "make_deserialize",
    "make_poll_single_request",
    "make_recv_ordinary_stage_result",
    "make_recv_stage_payload",
    "make_requeue_or_drop_failed_send",
    "make_serialize",
    "put_tombstone",
]

_log = logging.getLogger(LOG_NAME)

#: Attribute of a payload transport holding `{request_id: record}` for requests its poller failed: the
#: one vLLM-Omni's own poller keeps with the upstream series (docs/upstream.md), so that one reader
#: (`failed_requests`) serves both.
FAILURES_ATTR = "_failed_load_reqs"


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
    tombstone = Tombstone.of(cause, request_id=task.get("request_id"), stage_id=getattr(transport, "_stage_id", None))
    return tombstone.details


# --- the factories: `(module, original) -> replacement`, one per entry in `manifest.TARGETS` ----
# `OmniSerde.serialize`/`deserialize` (`...utils.serialization`) carry tombstones for every connector:
# each serializes through the one `OmniSerializer`, directly (Mooncake and Yuanrong transfer
# engines, MORI) or through `OmniConnectorBase.serialize_obj` (shared memory, Mooncake store,
# Yuanrong, NIXL). Its other users never meet a frame: a frame is not a msgpack document.


def make_serialize(module: ModuleType, serialize: Any) -> Any:
    """`OmniSerde.serialize`: a `Tombstone` becomes its bare frame."""

    def serialize_tombstones(self: Any, obj: Any, /) -> bytes:
        if isinstance(obj, Tombstone):
            return obj.frame()
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
            raise payload.error(request_id=external_req_id)
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
