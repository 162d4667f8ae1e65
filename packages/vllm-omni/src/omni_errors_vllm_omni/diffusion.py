"""Diffusion-side hops: worker -> executor -> engine -> StageDiffusionProc (stage processes).

- `DiffusionOutput.from_exception` (worker -> executor): the record travels with the output,
  classified while the exception's type is still known (an OOM is an OOM by type, not by text);
- the in-process executor builds `DiffusionOutput(error=str(exc))` for a failing worker; it now
  answers with `from_exception`, as a multiprocess worker does;
- `DiffusionEngine.postprocess_output` (engine rebuild): a record-carrying output is raised as the
  exception `rebuild` gives (client, server or fatal), not as `RuntimeError(text)`;
- `DiffusionEngine._emit_outputs`: after a fatal record is delivered, the engine fails as a whole
  (`_fail_engine`), so queued requests are answered and the executor stops instead of serving on;
- StageDiffusionProc: error frames get the record as extra top-level keys (old receivers ignore
  them), and a proc that saw a fatal failure exits with the documented code (81 OOM, 80 fatal);
  its death notice (`DIFFUSION_PROC_DEAD`) follows a frame with the record it dies of;
- a remote StageDiffusionProc (multi-node mode) watches its links to the head
  (`link_watch.head_links`): when the head is gone or cut off, the proc ends itself (exit 86), and
  so does its launcher.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import weakref
from types import ModuleType
from typing import Any

import zmq
from omni_errors.carry import FRAME_KEY, Carried, attach, carried, failure_frame_fields, record_failure
from omni_errors.fatal import process as fatal
from omni_errors.link_watch import LinkWatch, head_links
from omni_errors.semantics.ids import with_ids

from omni_errors_vllm_omni.liveness import expect
from omni_errors_vllm_omni.settings import LOG_NAME

__all__ = [
    "make_collective_rpc",
    "make_emit_outputs",
    "make_frame_encoder",
    "make_from_exception",
    "make_postprocess_output",
    "make_proc_close",
    "make_run_loop",
    "make_signal_fatal",
]

_log = logging.getLogger(LOG_NAME)


def make_from_exception(module: ModuleType, original: Any) -> Any:
    """`DiffusionOutput.from_exception` attaches the record."""
    build = original.__func__

    def from_exception(cls: Any, /, exc: BaseException) -> Any:
        output = build(cls, exc)
        value = record_failure(exc)
        if value is not None:
            attach(output, value)
        return output

    return classmethod(from_exception)


def make_collective_rpc(module: ModuleType, original: Any) -> Any:
    """`UniProcDiffusionExecutor.collective_rpc("execute_model")` answers a failure with `from_exception`."""
    from vllm_omni.diffusion.data import DiffusionOutput

    def collective_rpc(self: Any, method: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return original(self, method, *args, **kwargs)
        except Exception as exc:
            if method != "execute_model":
                raise
            return DiffusionOutput.from_exception(exc)  # what a multiprocess worker returns

    return collective_rpc


def _first_fatal(runner_output: Any, request_ids: list[str]) -> Carried | None:
    for request_id in request_ids:
        one = runner_output.get_request_output(request_id)
        value = carried(getattr(one, "result", None))
        if value is not None and value.details.fatal:
            return value
    return None


def make_postprocess_output(module: ModuleType, original: Any) -> Any:
    """`DiffusionEngine.postprocess_output` raises the carried record, rebuilt."""
    from omni_errors.semantics.exceptions import rebuild

    def postprocess_output(self: Any, request: Any, output: Any) -> Any:
        value = carried(output)
        if value is not None and output.error and not output.aborted:
            request_id = getattr(request, "request_id", None)
            raise rebuild(with_ids(value.details, request_id=request_id, stage_id=None))
        return original(self, request, output)

    return postprocess_output


def make_emit_outputs(module: ModuleType, original: Any) -> Any:
    """`DiffusionEngine._emit_outputs` fails the engine after it delivered a fatal record."""
    from omni_errors.semantics.exceptions import rebuild

    def _emit_outputs(self: Any, finished_ids: Any, scheduled_request_ids: Any, runner_output: Any, **kw: Any) -> Any:
        result = original(self, finished_ids, scheduled_request_ids, runner_output, **kw)
        value = _first_fatal(runner_output, list(scheduled_request_ids))
        if value is not None:
            if value.exit_code is not None:
                fatal.note(value.exit_code)
            _log.critical("omni-errors: fatal failure in the diffusion engine; stopping it")
            self._fail_engine(rebuild(value.details))
        return result

    return _emit_outputs


def make_frame_encoder(module: ModuleType, original: type) -> type:
    """StageDiffusionProc's `OmniMsgpackEncoder`: error frames get the record's keys."""

    class RecordFrameEncoder(original):  # type: ignore[misc]
        """Adds the record to error frames; they are encoded inside the `except` that caught the failure."""

        def encode(self, obj: Any) -> Any:
            exc = sys.exc_info()[1]
            if isinstance(obj, dict) and obj.get("type") == "error" and FRAME_KEY not in obj and exc is not None:
                obj = {**obj, **failure_frame_fields(exc, request_id=obj.get("request_id"))}
            return super().encode(obj)

    return RecordFrameEncoder


def make_proc_close(module: ModuleType, original: Any) -> Any:
    """`StageDiffusionProc.close`: a proc that saw a fatal failure exits with its documented code."""

    def close(self: Any) -> None:
        original(self)
        code = fatal.exit_code()
        if code is not None:  # the proc is ending because of a fatal failure: say which
            raise SystemExit(code)

    return close


# Each running proc's links (its `run_loop`'s two sockets), for its death notice.
_links: weakref.WeakKeyDictionary[Any, LinkWatch] = weakref.WeakKeyDictionary()


def make_run_loop(module: ModuleType, original: Any) -> Any:
    """`StageDiffusionProc.run_loop`: its two sockets are the proc's links to the head; a remote proc
    whose head is gone or cut off stops its loop and exits 86 (`make_proc_close`)."""

    async def run_loop(self: Any, request_address: str, response_address: str) -> None:
        watch = head_links((request_address, response_address))
        expect(watch)
        _links[self] = watch
        try:
            await original(self, request_address, response_address)
        finally:
            watch.stop()

    return run_loop


def make_signal_fatal(module: ModuleType, original: Any) -> Any:
    """`StageDiffusionProc._signal_fatal_engine_failure`: the death notice that follows is preceded by a
    frame with the record the proc dies of (no request id: vLLM-Omni's receiver only logs it)."""
    from vllm.v1.engine.exceptions import EngineDeadError

    encoder = module.OmniMsgpackEncoder()

    def _signal_fatal_engine_failure(self: Any, reason: str) -> None:
        event = self._fatal_event
        watch = _links.get(self)
        if event is not None and not event.is_set() and watch is not None:
            # The same fields as vLLM-Omni's own death notice (the upstream series): the fatal record, the
            # exit code that wins in this proc.
            death = {"type": "error", **failure_frame_fields(EngineDeadError())}
            _send_now(watch.sockets.get(watch.endpoints[1]), encoder.encode(death))
        original(self, reason)

    return _signal_fatal_engine_failure


def _send_now(socket: Any, data: bytes) -> None:
    """Send without waiting (the proc's loop thread); a socket that cannot take it now drops it."""
    if socket is None:
        return
    try:
        sent = socket.send(data, zmq.NOBLOCK)
    except zmq.ZMQError:
        return
    if isinstance(sent, asyncio.Future):  # zmq.asyncio: already done; its error, if any, is read here
        sent.add_done_callback(lambda f: f.cancelled() or f.exception())
