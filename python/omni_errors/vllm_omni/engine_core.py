"""LLM stages: vLLM's `EngineCore` in vLLM-Omni's `StageEngineCoreProc`, and its client in the API process.

- `EngineCoreProc._send_engine_dead` (stage process): vLLM's bare dead signal is preceded by an
  outputs message with the record the engine dies of and the exit code it implies
  (`RecordEngineCoreOutputs`: vLLM-Omni's `OmniEngineCoreOutputs` with two trailing fields, so a
  client without the plugin decodes it as an empty batch and drops it). The exception being
  handled decides, by type along its cause chain: an OOM is 81, anything else that ended the
  engine loop 80.
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
"""

# No `from __future__ import annotations` here: msgspec reads the fields of the record structs,
# defined inside a function, from their evaluated annotations.
import logging
import signal
import sys
import weakref
from types import ModuleType
from typing import Any, ClassVar

from omni_errors._native import encode
from omni_errors.carry import Carried, carried, record_failure
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import fatal_record
from omni_errors.vllm_omni.settings import LOG_NAME

__all__ = [
    "death_notice",
    "make_client_init",
    "make_engine_core_outputs",
    "make_engine_shutdown",
    "make_preproc_error",
    "make_send_engine_dead",
    "record_outputs_class",
]

_log = logging.getLogger(LOG_NAME)

_outputs_classes: dict[type, Any] = {}
#: Set in a stage process once its engine core sent its death notice: its shutdown ends the process.
_died_with: list[ExitCode] = []


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


def death_notice(exc: BaseException | None) -> Carried:
    """The record an engine core dies of, and its exit code: `exc`'s own when it is fatal by type
    (81 for an OOM anywhere in its chain), else the canonical fatal record with 80 (any exception
    that escapes the engine loop ends the engine). The code is noted in this process's fatal state."""
    value = record_failure(exc) if exc is not None else None
    if value is None or not value.details.fatal:
        value = Carried(fatal_record(stage_id=None), ExitCode.FATAL_ENGINE)
    return Carried(value.details, fatal.note(value.exit_code or ExitCode.FATAL_ENGINE))


def make_engine_core_outputs(module: ModuleType, original: type) -> Any:
    """The stage client's outputs type: `RecordEngineCoreOutputs`."""
    return record_outputs_class(original)


def make_send_engine_dead(module: ModuleType, original: Any) -> Any:
    """`EngineCoreProc._send_engine_dead`: the record the engine dies of goes first, on every output socket."""
    from vllm_omni.engine import OmniEngineCoreOutputs

    outputs_cls = record_outputs_class(OmniEngineCoreOutputs)

    def _send_engine_dead(self: Any) -> None:
        said = death_notice(sys.exc_info()[1])
        _died_with.append(said.exit_code or ExitCode.FATAL_ENGINE)
        _log.critical(
            "omni-errors: the engine core is dead (%s %s); exit code %d",
            said.details.status_code,
            said.details.error_type,
            _died_with[-1],
        )
        notice = outputs_cls(
            engine_index=self.engine_index, omni_error=encode(said.details), omni_error_exit=int(_died_with[-1])
        )
        for client_index in range(len(self.addresses.outputs)):
            self.output_queue.put_nowait((client_index, notice))
        original(self)

    return _send_engine_dead


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
    """`EngineCore.shutdown`: an engine core that sent its death notice ends its process with that code."""

    def shutdown(self: Any) -> None:
        if not _died_with:
            original(self)
            return
        code = int(fatal.exit_code() or _died_with[-1])
        # The API process stops the replica it saw die (SIGTERM, SIGKILL 5 s later): the process is
        # ending already, and a SIGTERM now would end it with -15 instead of its code.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            original(self)
        finally:
            raise SystemExit(code)  # the process ends here, with its documented code

    return shutdown


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
