"""LLM stages: vLLM's `EngineCore` in vLLM-Omni's `StageEngineCoreProc`, and its client in the API process.

- `EngineCoreProc._send_engine_dead` (stage process): vLLM's bare dead signal is preceded by an
  outputs message with the record the engine dies of and the exit code it implies
  (`RecordEngineCoreOutputs`: vLLM-Omni's `OmniEngineCoreOutputs` with two trailing fields, so a
  client without the plugin decodes it as an empty batch and drops it). The exception being
  handled decides, by type along its cause chain: an OOM is 81, anything else that ended the
  engine loop 80.
- `EngineCoreProc._process_engine_step` (stage process): each step runs under a deadline
  (`omni_errors.fatal.step_deadline`, `OMNI_ERRORS_STEP_DEADLINE_S`); a forward that has not returned
  by then is a hung stage, which nothing on its loop can notice: a watching thread sends the death
  notice (the canonical fatal record, 84) and vLLM's dead signal, and ends the process with 84.
- `EngineCoreProc._handle_request_preproc_error` (stage process): a request the stage refused while
  preparing it (its own validation; vLLM 0.30 answers a bare `FinishReason.ERROR`) is answered
  with its record in the request's output (`RecordEngineCoreOutput.omni_error`), its sanitized
  text as `stop_reason` for a reader without the plugin; the orchestrator's `_handle_stage_error`
  reads it (`omni_errors.carry.output_record`), with its category, status and `parameter`.
- `EngineCore.shutdown` (stage process): an engine core that sent its death notice exits with that
  code instead of 1, ignoring the API process's SIGTERM while it shuts down (which ended it with
  -15); a headless launcher passes the code on.
- The stage client's outputs type (API process) is `RecordEngineCoreOutputs` (its requests' outputs
  `RecordEngineCoreOutput`), and each client keeps the record its engine said it died of
  (`last_fatal`, what `client.last_words` reads), so the orchestrator ends the pipeline with 80 or
  81 instead of 85 ("vanished without a word").

A remote LLM stage (multi-node: `--headless`), whose links are vLLM's engine-core sockets:
- `StageEngineCoreProc.run_stage_core`: a stage process loads vLLM's plugins before its handshake
  (`run_stage_core` below), so that this plugin's CURVE and link watch apply to every socket;
- `StageEngineCoreClientBase.make_async_mp_client` (API process): a remote replica's client watches
  its two links, which stand in for the engine manager vLLM's monitor reads (`RemoteReplica`);
- `EngineCoreProc._perform_handshakes` (stage process): the engine core watches its links to the
  head and ends with 86 when they are lost.
"""

# No `from __future__ import annotations` here: msgspec reads the fields of the record structs,
# defined inside a function, from their evaluated annotations.
import contextlib
import logging
import os
import signal
import sys
import weakref
from collections.abc import Iterator
from types import ModuleType
from typing import Any, ClassVar

from omni_errors import encode
from omni_errors.carry import Carried, carried, death_notice, hung_notice, record_failure
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.fatal.step_deadline import StepDeadline, step_deadline_s
from omni_errors.link_watch import LinkWatch, RemoteReplica
from omni_errors.settings import STEP_DEADLINE

from omni_errors_vllm_omni.liveness import expect
from omni_errors_vllm_omni.settings import LOG_NAME

__all__ = [
    "make_async_mp_client",
    "make_client_init",
    "make_engine_core_outputs",
    "make_engine_shutdown",
    "make_perform_handshakes",
    "make_preproc_error",
    "make_process_engine_step",
    "make_run_stage_core",
    "make_send_engine_dead",
    "record_outputs_class",
    "run_stage_core",
]

_log = logging.getLogger(LOG_NAME)

_outputs_classes: dict[type, Any] = {}
#: vLLM-Omni's own `StageEngineCoreProc.run_stage_core`, once this process's plugin replaced it.
_vllm_omni_run_stage_core: list[Any] = []


def record_outputs_class(outputs: type) -> Any:
    """vLLM-Omni's `OmniEngineCoreOutputs` with the record trailing, and each request's output too
    (one subclass per class)."""
    cls = _outputs_classes.get(outputs)
    if cls is not None:
        return cls
    from vllm_omni.engine import OmniEngineCoreOutput

    class RecordEngineCoreOutput(OmniEngineCoreOutput):  # type: ignore[misc]
        """A request's output with the record of its failure (`omni_error`, the record's frame)."""

        omni_error: bytes | None = None

    class RecordEngineCoreOutputs(outputs):  # type: ignore[misc]
        """An engine core's outputs with the record it dies of (`omni_error`, the record's frame) and
        the exit code that implies (`omni_error_exit`): trailing, so that a reader without them
        decodes the message as an empty batch."""

        output_class: ClassVar[type] = RecordEngineCoreOutput
        outputs: list[RecordEngineCoreOutput] = []  # noqa: RUF012 - msgspec copies a mutable default
        omni_error: bytes | None = None
        omni_error_exit: int | None = None

    _outputs_classes[outputs] = RecordEngineCoreOutputs
    return RecordEngineCoreOutputs


def make_engine_core_outputs(module: ModuleType, original: type) -> Any:
    """The stage client's outputs type: `RecordEngineCoreOutputs`."""
    return record_outputs_class(original)


def make_send_engine_dead(module: ModuleType, original: Any) -> Any:
    """`EngineCoreProc._send_engine_dead`: the record the engine dies of goes first, on every output socket."""
    from vllm_omni.engine import OmniEngineCoreOutputs

    outputs_cls = record_outputs_class(OmniEngineCoreOutputs)

    def _send_engine_dead(self: Any) -> None:
        said = death_notice(sys.exc_info()[1])  # its exit code is the one the fatal state noted
        _log.critical(
            "omni-errors: the engine core is dead (%s %s); exit code %d",
            said.details.status_code,
            said.details.error_type,
            said.exit_code,
        )
        _send_notice(self, outputs_cls, said)
        original(self)

    return _send_engine_dead


def _send_notice(engine: Any, outputs_cls: Any, said: Carried) -> None:
    """Queue the engine core's death notice for every client it serves (its output thread sends it)."""
    code = said.exit_code or ExitCode.FATAL_ENGINE
    notice = outputs_cls(engine_index=engine.engine_index, omni_error=encode(said.details), omni_error_exit=int(code))
    for client_index in range(len(engine.addresses.outputs)):
        engine.output_queue.put_nowait((client_index, notice))


def make_process_engine_step(module: ModuleType, original: Any) -> Any:
    """`EngineCoreProc._process_engine_step`: each step runs under the stage's step deadline
    (`omni_errors.fatal.step_deadline`); a step past it ends the engine core (`_end_hung`)."""
    from vllm.v1.engine.core import EngineCoreProc
    from vllm_omni.engine import OmniEngineCoreOutputs

    outputs_cls = record_outputs_class(OmniEngineCoreOutputs)
    deadline_s = step_deadline_s()
    deadlines: weakref.WeakKeyDictionary[Any, StepDeadline] = weakref.WeakKeyDictionary()

    def _end_hung(engine: Any, ran_s: float) -> None:
        """The forward never gave the loop back: say so and end the process from the watching thread
        (nothing can interrupt a stuck forward). vLLM's dead signal and the notice go out through the
        engine core's output thread, which is still serving; then the process exits with 84."""
        said = hung_notice()
        _log.critical(
            "omni-errors: a step of this engine core has run %.1f s (deadline %g s, %s): it is hung; "
            "ending it (exit %d)",
            ran_s,
            deadline_s,
            STEP_DEADLINE.name,
            said.exit_code,
        )
        _send_notice(engine, outputs_cls, said)
        EngineCoreProc._send_engine_dead(engine)  # vLLM's own: the dead signal, its output thread joined (5 s)
        os._exit(int(said.exit_code or ExitCode.STAGE_HUNG))  # omni-errors: ignore[OE301]: the main thread is stuck

    def _process_engine_step(self: Any) -> bool:
        watch = deadlines.get(self)
        if watch is None:
            engine = weakref.ref(self)
            watch = deadlines[self] = StepDeadline("engine-core", deadline_s, lambda ran_s: _end_hung(engine(), ran_s))
        with watch.step():
            return bool(original(self))

    return _process_engine_step


def make_preproc_error(module: ModuleType, original: Any) -> Any:
    """`EngineCoreProc._handle_request_preproc_error`: a request the stage refused (its own validation)
    is answered with the record of the exception being handled, not a bare `FinishReason.ERROR`."""
    from vllm.v1.engine import FinishReason
    from vllm_omni.engine import OmniEngineCoreOutputs

    outputs_cls = record_outputs_class(OmniEngineCoreOutputs)

    def _handle_request_preproc_error(self: Any, request: Any) -> None:
        exc = sys.exc_info()[1]
        value = record_failure(exc, request_id=request.request_id) if exc is not None else None
        if value is None or value.details.fatal:  # not a request's failure: vLLM's own answer and log
            original(self, request)
            return
        details = value.details
        log = _log.warning if details.category == "client" else _log.exception  # a server's: its traceback
        log(
            "omni-errors: request %s refused by the stage: %s %s",
            request.request_id,
            details.status_code,
            details.error_type,
        )
        failed = outputs_cls.output_class(
            request.request_id,
            [],
            finish_reason=FinishReason.ERROR,
            stop_reason=details.message,  # what a reader without the record shows
            omni_error=encode(details),
        )
        notice = outputs_cls(finished_requests=[request.request_id], outputs=[failed])
        self.output_queue.put_nowait((request.client_index, notice))

    return _handle_request_preproc_error


def make_engine_shutdown(module: ModuleType, original: Any) -> Any:
    """`EngineCore.shutdown`: a stage process whose fatal state holds a code (its engine's death notice,
    or its lost head) ends with that code, as vLLM-Omni's own `run_stage_core` does with the series."""

    def shutdown(self: Any) -> None:
        code = fatal.exit_code()
        if code is None:
            original(self)
            return
        # The API process stops the replica it saw die (SIGTERM, SIGKILL 5 s later): the process is
        # ending already, and a SIGTERM now would end it with -15 instead of its code.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            original(self)
        finally:
            raise SystemExit(int(code))  # the process ends here, with its documented code

    return shutdown


def make_run_stage_core(module: ModuleType, original: Any) -> Any:
    """`StageEngineCoreProc.run_stage_core`, what vLLM-Omni spawns an LLM stage process with: the
    process runs `run_stage_core` below instead (module level: a spawned process finds it by name)."""
    _vllm_omni_run_stage_core[:] = [original.__func__]  # the static method as stored
    return staticmethod(run_stage_core)


def run_stage_core(*args: Any, **kwargs: Any) -> None:
    """An LLM stage process's entry point: vLLM's plugins first, then vLLM-Omni's own. vLLM loads them
    only while it builds the engine core, after the handshake with the API process: on a remote
    stage that socket would miss this plugin's CURVE (a head that requires it never answers) and
    its link watch."""
    from vllm.plugins import load_general_plugins

    load_general_plugins()  # type: ignore[no-untyped-call]
    if _vllm_omni_run_stage_core:
        _vllm_omni_run_stage_core[0](*args, **kwargs)
        return
    # The plugin did not register in this process: vLLM-Omni's own entry point is in place.
    from vllm_omni.engine.stage_engine_core_proc import StageEngineCoreProc

    StageEngineCoreProc.run_stage_core(*args, **kwargs)


def make_perform_handshakes(module: ModuleType, original: Any) -> Any:
    """`EngineCoreProc._perform_handshakes` (stage process): an engine core whose client is on another
    host (its addresses are TCP: a `--headless` stage) watches its links to it; when the head is
    gone or cut off, the process ends with 86 (`ExitCode.LINK_LOST`)."""

    @contextlib.contextmanager
    def _perform_handshakes(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
        with original(self, *args, **kwargs) as addresses:
            links = [a for a in (*addresses.inputs, *addresses.outputs) if a.startswith("tcp://")]
            if links:  # connected by the IO threads started before the context exits
                # Its outputs keep their linger: a death notice must still reach the head.
                watch = LinkWatch("engine-core", links, keep_linger=True, heartbeats=False)
                watch.when_lost(_head_lost)
                expect(watch)
            yield addresses

    return _perform_handshakes


def _head_lost(reason: str) -> None:
    """The engine core's links to its head are lost: the process ends with 86. vLLM-Omni's SIGTERM
    handler ends the busy loop, and `shutdown`'s wrap exits with the code."""
    code = fatal.note(ExitCode.LINK_LOST)
    _log.critical("omni-errors: this engine core lost its head (%s); ending it (exit %d)", reason, code)
    os.kill(os.getpid(), signal.SIGTERM)


def make_async_mp_client(module: ModuleType, original: Any) -> Any:
    """`StageEngineCoreClientBase.make_async_mp_client`: a remote replica's client (a multi-node head's:
    its engine core runs on another host, and it has no engine manager) watches its links, which
    stand in for the engine manager, so vLLM's own monitor sees the engine die when they are lost."""

    build = original.__func__  # the static method as stored

    def make_async_mp_client(*args: Any, **kwargs: Any) -> Any:
        addresses = kwargs.get("client_addresses") or {}
        if kwargs.get("engine_manager") is None and "input_address" in addresses:
            metadata = kwargs.get("metadata")
            name = f"stage-{getattr(metadata, 'stage_id', '?')}-replica-{getattr(metadata, 'replica_id', '?')}"
            # TCP keepalive, not ZMTP heartbeats: see `LinkWatch`.
            watch = LinkWatch(name, (addresses["input_address"], addresses["output_address"]), heartbeats=False)
            expect(watch)  # the client binds them: keepalive and a monitor on each
            kwargs["engine_manager"] = RemoteReplica(watch)
        return build(*args, **kwargs)

    return staticmethod(make_async_mp_client)


def make_client_init(module: ModuleType, original: Any) -> Any:
    """`StageEngineCoreClientBase.__init__`: the client keeps the record its engine core died of."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _keep_last_fatal(self)

    return __init__


def _keep_last_fatal(client: Any) -> None:
    """Read each message the client's decoder decodes for a death notice (`last_fatal`). The decoder
    is the client's own instance, which its output task already holds: its `decode` is wrapped there."""
    decoder = client.decoder
    decode_outputs = decoder.decode
    owner = weakref.ref(client)  # the output task must not keep the client alive

    def decode_keeping(*args: Any, **kwargs: Any) -> Any:
        outputs = decode_outputs(*args, **kwargs)
        said = carried(outputs)  # the death notice's record; None on any other batch
        target = owner()
        if said is not None and target is not None:
            target.last_fatal = said
        return outputs

    decoder.decode = decode_keeping
