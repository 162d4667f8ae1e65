"""The orchestrator (API process, its own thread): error messages carry the record; a dead pipeline ends.

- The orchestrator (and the membership controller) build `RecordErrorMessage`s (`records`), so
  every error they emit carries a record; one built from flat fields only (dead replicas, lost
  CFG companions...) gets its record from them.
- `_handle_stage_error` reads the stage's record, vLLM's `RequestError` (LLM stages), or the 0.30
  flat fields (a stage without the plugin), keeping `stage_id`, `parameter` and `request_id`.
- `_handle_dead_replica` keeps vLLM-Omni's per-replica eviction, and while the stage has another
  live replica the dead one's requests get a lost replica's 503, not a fatal answer (which ends the
  server); when a stage has no live replica left, or a record is fatal, the pipeline ends: every
  in-flight request is answered with the fatal record, the orchestrator shuts its stages down, and
  the process is told how it must exit (the code the replica said it died of: `client.last_words`).
- A remote replica (multi-node mode) follows `distributed`'s policy instead: its requests are
  answered and it is detached at once, and a stage left without replicas waits for one to
  register before the pipeline ends.
- The membership controller stops with the orchestrator: vLLM-Omni's orchestrator waits for the
  membership watcher before it stops it, so every head shutdown waited for the engine's 30 s join.
"""

from __future__ import annotations

import functools
import logging
from types import ModuleType
from typing import Any

from omni_errors import OmniErrorDetails
from omni_errors.carry import Carried, died_of, output_record
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.link_watch import RemoteReplica
from omni_errors.semantics.core_table import fatal_record, replica_lost_record
from omni_errors.semantics.ids import with_request_id
from omni_errors.server.rejoin import rejoin

from omni_errors_vllm_omni.client import last_words
from omni_errors_vllm_omni.records import (
    error_message_class,
    other_replica_lives,
    record_message_class,
    stage_serves_on,
)
from omni_errors_vllm_omni.settings import LOG_NAME

__all__ = [
    "REPLICA_LOST",
    "fail_pipeline",
    "make_error_message",
    "make_handle_dead_replica",
    "make_handle_stage_error",
    "make_orchestrator_init",
]

_log = logging.getLogger(LOG_NAME)

#: What a request in flight on a lost remote replica is told (vLLM-Omni's own words for it).
REPLICA_LOST = "stage replica disappeared"


async def fail_pipeline(orchestrator: Any, details: OmniErrorDetails, code: ExitCode) -> None:
    """End the pipeline (once per process, `fatal.end_pipeline`): every in-flight request gets the
    fatal record, then the orchestrator stops through its own `ShutdownRequestMessage`."""
    request_ids = list(orchestrator.request_states)
    answers = fatal.end_pipeline(details, code, request_ids)
    if answers is None:
        return
    message_cls = error_message_class()
    for answer in answers:
        await orchestrator.output_async_queue.put(message_cls.of(answer))
    await orchestrator._cleanup_request_ids(request_ids, abort=False, release_owners=True)
    from vllm_omni.engine.messages import ShutdownRequestMessage

    await orchestrator.request_async_queue.put(ShutdownRequestMessage())


def make_error_message(module: ModuleType, original: type) -> Any:
    """The module builds `RecordErrorMessage`s: every error it emits carries a record."""
    return record_message_class(original)


def make_orchestrator_init(module: ModuleType, original: Any) -> Any:
    """`OrchestratorBase.__init__`: the membership controller's shutdown event is the orchestrator's."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        membership = getattr(self, "_membership", None)
        if membership is not None:  # its watcher task ends when the orchestrator stops, not after
            membership._shutdown_event = self._shutdown_event

    return __init__


def _client(orchestrator: Any, stage_id: int, replica_id: int) -> Any:
    """The client of replica `replica_id` of stage `stage_id`, or None if the pool has no such slot."""
    clients = orchestrator.stage_pools[stage_id].clients
    return clients[replica_id] if 0 <= replica_id < len(clients) else None


def _remote_client(orchestrator: Any, stage_id: int, replica_id: int | None) -> Any:
    """The head-side client of a remote replica (multi-node mode), or None for any other replica."""
    if replica_id is None or getattr(orchestrator, "_membership", None) is None:
        return None
    client = _client(orchestrator, stage_id, replica_id)
    return client if _links_of(client) is not None else None


def _links_of(client: Any) -> RemoteReplica | None:
    """A remote replica's links, standing in for its process: a diffusion client's process manager,
    an LLM client's engine manager."""
    manager = getattr(client, "_proc_manager", None)
    if manager is None:
        manager = getattr(getattr(client, "resources", None), "engine_manager", None)
    return manager if isinstance(manager, RemoteReplica) else None


def make_handle_stage_error(module: ModuleType, original: Any) -> Any:
    """`OrchestratorBase._handle_stage_error`: the stage's record reaches the client; a fatal one ends the pipeline."""
    message_cls = error_message_class()

    async def _handle_stage_error(self: Any, stage_id: int, output: Any, *, error: str | None = None) -> None:
        tracker = self._cfg_tracker
        parent_id = output.request_id
        if tracker.is_companion(output.request_id):
            parent_id = tracker.get_parent_id(output.request_id) or output.request_id
        value = output_record(output, request_id=parent_id, stage_id=stage_id, error=error)
        # A CFG companion's record answers its parent, the request the client sent.
        details = with_request_id(value.details, parent_id)
        pool = self.stage_pools[stage_id]
        replica_id = pool.get_bound_replica_id(output.request_id)
        remote = _remote_client(self, stage_id, replica_id)
        if details.fatal and remote is None and other_replica_lives(pool, replica_id):
            # One replica's fatal failure: its stage serves on (the replica's own end evicts it).
            details = replica_lost_record(stage_id=stage_id, request_id=parent_id)
        await self.output_async_queue.put(message_cls.of(details))
        await self._cleanup_request_ids(
            [parent_id, *tracker.cleanup_parent(parent_id)], abort=True, release_owners=True
        )
        if not details.fatal:
            return
        if remote is not None:  # a remote replica dies of it: the replica is lost, not yet the pipeline
            # Lost now, not when its links drop: a request sent meanwhile would go to a dying replica.
            await _lose_remote_replica(self, stage_id, replica_id, remote, said=value)
            return
        await fail_pipeline(self, details, value.exit_code or ExitCode.FATAL_ENGINE)

    return _handle_stage_error


def make_handle_dead_replica(module: ModuleType, original: Any) -> Any:
    """`OrchestratorBase._handle_dead_replica`: a stage without a live replica ends the pipeline (a
    remote replica's stage waits for a replica to register first)."""

    async def _handle_dead_replica(self: Any, stage_id: int, replica_id: int, error: Any) -> None:
        remote = _remote_client(self, stage_id, replica_id)
        if remote is not None:
            await _lose_remote_replica(self, stage_id, replica_id, remote)
            return
        pool = self.stage_pools[stage_id]
        # Read before the original closes its socket: the records the proc sent before it died.
        client = _client(self, stage_id, replica_id)
        said = last_words(client) if client is not None else None
        _, code = died_of(said, stage_id=stage_id, remote=False, error=error)
        # Its requests are answered as a lost replica's while another replica serves on.
        with stage_serves_on(other_replica_lives(pool, replica_id)):
            await original(self, stage_id, replica_id, error)
        if pool.live_replica_ids():
            return  # other replicas keep serving (vLLM-Omni's per-replica fault isolation)
        _log.critical("omni-errors: stage-%s has no live replica left; ending the pipeline", stage_id)
        await fail_pipeline(self, fatal_record(stage_id=stage_id), code)

    return _handle_dead_replica


async def _lose_remote_replica(
    orchestrator: Any, stage_id: int, replica_id: int, client: Any, *, said: Carried | None = None
) -> None:
    """A remote replica is gone, or dying of the fatal record it `said`: answer its requests, detach
    it (so that it may register again), and if its stage has no replica left, open the stage's
    rejoin window."""
    died_with, code = died_of(said or last_words(client), stage_id=stage_id, remote=True)
    _log.error(
        "omni-errors: stage-%d replica-%d is lost (%s %s); answering its requests and detaching it",
        stage_id,
        replica_id,
        died_with.status_code,
        died_with.error_type,
    )
    fatal.note(code)
    pool = orchestrator.stage_pools[stage_id]
    # vLLM-Omni's own unregister path answers the requests routed to the replica and detaches it.
    # The address the replica registered with: a diffusion client's request address, an LLM client's input address.
    address = getattr(client, "request_address", None) or client.client_addresses["input_address"]
    await orchestrator._membership.handle_unregister(stage_id, address)
    if client in pool.clients:  # not attached by address (a pre-allocated slot): evict it by index
        pool.evict_replica(replica_id)
    live = bool(pool.live_replica_ids())
    stranded = [
        request_id
        for request_id, state in orchestrator.request_states.items()
        if stage_id in state.stage_submit_ts and (not live or pool.get_bound_replica_id(request_id) == replica_id)
    ]
    message_cls = error_message_class()
    for request_id in stranded:
        lost = message_cls(error=REPLICA_LOST, request_id=request_id, stage_id=stage_id)
        await orchestrator.output_async_queue.put(lost)
    if stranded:
        await orchestrator._cleanup_request_ids(stranded, abort=True, release_owners=True)
    if not live:
        rejoin().wait_for_replica(stage_id, died_with, code, functools.partial(fail_pipeline, orchestrator))
