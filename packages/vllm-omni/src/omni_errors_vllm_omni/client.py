"""Stage clients in the API process: the ZMQ hop to StageDiffusionProc, and error outputs.

- Bounded, non-blocking sends. The client's PUSH socket blocks a `send` for as long as the proc
  is gone (seed 001: the orchestrator hung in `abort_requests_async` and `shutdown`); every send
  now has a deadline (`SEND_TIMEOUT_MS`), a missed one marks the stage dead (`EngineDeadError`),
  and `shutdown` stops the proc within `STOP_TIMEOUT_S` (SIGTERM, then SIGKILL).
- Error frames that carry a record become the request's error output with the record attached
  (the client's own error branch builds the same output from the flat fields, losing it). A
  record frame without a request is the proc's death notice; the client keeps it, and so it does
  the last fatal record a request's frame carried (`last_words`).
- A remote replica's client (multi-node mode) has no process manager: its links stand in for
  the process (`omni_errors.link_watch.RemoteReplica`), so a SIGKILLed or cut-off remote proc is
  seen at once.
- `OmniRequestOutput.from_error`, called inside the `except` that caught a failure (the inline
  diffusion client), attaches the record of the exception being handled. The inline client has no
  proc to send a death notice: its executor's report of a lost worker is one (`last_words`), so a
  lost executor ends the server with 80 in both modes.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from types import ModuleType
from typing import Any

import zmq
from omni_errors.carry import FRAME_KEY, Carried, attach, carried, record_failure
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.link_watch import LinkWatch, RemoteReplica
from omni_errors.semantics.core_table import fatal_record

from omni_errors_vllm_omni.liveness import expect
from omni_errors_vllm_omni.settings import LOG_NAME

__all__ = [
    "SEND_TIMEOUT_MS",
    "STOP_TIMEOUT_S",
    "last_words",
    "make_abort",
    "make_add_request",
    "make_collective_rpc_async",
    "make_connect_transport",
    "make_frame_decoder",
    "make_from_error",
    "make_shutdown",
]

_log = logging.getLogger(LOG_NAME)

#: A live proc takes a message in microseconds; one that has not within a second is gone or hung.
SEND_TIMEOUT_MS = 1000
#: Ctrl+C must end the server within 3 s: the proc gets this long after SIGTERM before SIGKILL.
STOP_TIMEOUT_S = 0.5


def make_from_error(module: ModuleType, original: Any) -> Any:
    """`OmniRequestOutput.from_error` attaches the record of the failure being handled."""
    build = original.__func__

    def from_error(cls: Any, /, request_id: str, error_message: str, **kwargs: Any) -> Any:
        output = build(cls, request_id, error_message, **kwargs)
        exc = sys.exc_info()[1]
        if exc is not None and carried(output) is None:
            value = record_failure(exc, request_id=request_id)
            if value is not None:
                attach(output, value)
        return output

    return classmethod(from_error)


def _stage_gone(client: Any, what: str) -> Exception:
    from vllm.v1.engine.exceptions import EngineDeadError

    client._engine_dead = True
    return EngineDeadError(f"Stage-{client.stage_id} did not take a {what} within {SEND_TIMEOUT_MS} ms")


def make_connect_transport(module: ModuleType, original: Any) -> Any:
    """`StageDiffusionClient._connect_transport`: a send deadline and no linger on the request socket;
    a remote replica's links are watched, and stand in for its process."""

    def _connect_transport(self: Any, request_address: str, response_address: str) -> None:
        watch = LinkWatch(f"stage-{self.stage_id}-replica-{self.replica_id}", (request_address, response_address))
        expect(watch)
        original(self, request_address, response_address)
        self._request_socket.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
        self._request_socket.setsockopt(zmq.LINGER, 0)
        if self._proc_manager is None:  # a remote replica: nothing else watches it
            self._proc_manager = RemoteReplica(watch)

    return _connect_transport


def last_words(client: Any) -> Carried | None:
    """The record a dead replica said it died of, if any: its proc's death notice or last fatal
    record, or for an inline diffusion client, its executor's report of its loss.

    What the proc sent before it died is read first: a proc that exits at once is seen dead (its
    sentinel, a refused send) while its frames still wait in the client's socket, unread. An inline
    client has no proc: it is marked dead only when its executor says it lost its workers (the failure
    callback, `check_health`), which may come before its request in flight fails.
    """
    from vllm_omni.diffusion.inline_stage_diffusion_client import InlineStageDiffusionClient

    if isinstance(client, InlineStageDiffusionClient):
        return Carried(fatal_record(stage_id=client.stage_id), ExitCode.FATAL_ENGINE) if client._engine_dead else None
    drain = getattr(client, "_drain_responses", None)  # a StageDiffusionClient's (an LLM stage's has none)
    if drain is not None:
        with contextlib.suppress(zmq.ZMQError):  # a socket already closed has nothing left to read
            drain()
    said = getattr(client, "last_fatal", None)  # vLLM-Omni's own client keeps it (the upstream series)
    return said if said is not None else getattr(getattr(client, "_decoder", None), "death", None)


def _bounded(original: Any, what: str) -> Any:
    async def send(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await original(self, *args, **kwargs)
        except zmq.Again:
            raise _stage_gone(self, what) from None

    return send


def make_add_request(module: ModuleType, original: Any) -> Any:
    """`StageDiffusionClient.add_request_async`: a missed send deadline marks the stage dead."""
    return _bounded(original, "request")


def make_collective_rpc_async(module: ModuleType, original: Any) -> Any:
    """`StageDiffusionClient.collective_rpc_async`: a missed send deadline marks the stage dead."""
    return _bounded(original, "control message")


def make_abort(module: ModuleType, original: Any) -> Any:
    """`StageDiffusionClient.abort_requests_async`: an abort the gone stage cannot take is dropped."""

    async def abort_requests_async(self: Any, request_ids: list[str]) -> None:
        try:
            await original(self, request_ids)
        except zmq.Again:  # nothing left to abort on a stage that takes no messages
            _stage_gone(self, "abort")
            _log.warning(
                "omni-errors: stage-%s is gone; abort of %d request(s) dropped", self.stage_id, len(request_ids)
            )

    return abort_requests_async


def make_shutdown(module: ModuleType, original: Any) -> Any:
    """`StageDiffusionClient.shutdown`: never blocks; the proc gets `STOP_TIMEOUT_S` after SIGTERM."""

    def shutdown(self: Any) -> None:
        self._shutting_down = True
        try:
            self._request_socket.send(self._encoder.encode({"type": "shutdown"}), zmq.NOBLOCK)
        except zmq.ZMQError:
            pass
        manager = self._proc_manager
        if manager is not None and manager.proc.is_alive():
            manager.shutdown(timeout=STOP_TIMEOUT_S)
        self._request_socket.close(linger=0)
        self._response_socket.close(linger=0)
        self._zmq_ctx.term()
        if manager is not None and manager.proc.exitcode == ExitCode.OOM:
            fatal.note(ExitCode.OOM)  # the proc said how it ended; the server ends the same way

    return shutdown


def make_frame_decoder(module: ModuleType, original: type) -> type:
    """The client's `OmniMsgpackDecoder`: a record-carrying request error frame becomes an error output."""
    output_cls = module.OmniRequestOutput

    class RecordFrameDecoder(original):  # type: ignore[misc]
        """Turns a record-carrying request error frame into that request's error output."""

        death: Carried | None = None  # the record the proc died of, once it said

        def decode(self, *args: Any, **kwargs: Any) -> Any:
            msg = super().decode(*args, **kwargs)
            if not (isinstance(msg, dict) and msg.get("type") == "error" and FRAME_KEY in msg):
                return msg
            request_id = msg.get("request_id")
            value = carried(msg)
            if value is not None and value.details.fatal:
                self.death = value
            if value is None or request_id is None or msg.get("rpc_id") is not None:
                return msg  # vLLM-Omni's own branch logs a death notice or an RPC's failure
            if value.exit_code is not None:
                fatal.note(value.exit_code)
            _log.error(
                "omni-errors: request %s failed in the diffusion proc: %s %s",
                request_id,
                value.details.status_code,
                value.details.error_type,
            )
            output = output_cls.from_error(request_id, value.details.message)
            attach(output, value)
            output.metrics.update(msg.get("metrics") or {})
            return {"type": "result", "output": output}

    return RecordFrameDecoder
