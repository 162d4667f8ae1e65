"""An LLM stage's death notice (`omni_errors_vllm_omni.engine_core`) on vLLM's and vLLM-Omni's real
classes, and a lost replica's answer while its stage serves on (`records.stage_serves_on`).

The servers that prove the whole route are `test_fatal_llm*.py`; these check each piece alone: what
the notice is on the wire to a client with and without the plugin, and what the orchestrator's
answers become (what a stage says it died of is the core's: tests/semantics/test_vllm_omni_records.py).
"""

from __future__ import annotations

from types import SimpleNamespace

from omni_errors import OmniErrorDetails, classify, decode, encode
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_vllm_omni.engine_core import make_client_init, record_outputs_class
from omni_errors_vllm_omni.records import record_message_class, stage_serves_on
from vllm.v1.serial_utils import MsgpackDecoder, MsgpackEncoder
from vllm_omni.engine import OmniEngineCoreOutputs
from vllm_omni.engine.messages import ErrorMessage


def _notice(code: ExitCode) -> object:
    details = OmniErrorDetails("stage died", "server", 500, "InternalServerError", fatal=True)
    return record_outputs_class(OmniEngineCoreOutputs)(engine_index=0, omni_error=encode(details), omni_error_exit=code)


def test_a_client_without_the_plugin_reads_the_death_notice_as_an_empty_batch() -> None:
    """It decodes, and vLLM's output task drops a batch without outputs or stats: nothing breaks."""
    frames = MsgpackEncoder().encode(_notice(ExitCode.OOM))
    outputs = MsgpackDecoder(OmniEngineCoreOutputs).decode(frames)
    assert type(outputs) is OmniEngineCoreOutputs
    assert outputs.outputs == [] and outputs.scheduler_stats is None and outputs.utility_output is None


def test_the_plugins_client_reads_the_record_and_its_exit_code() -> None:
    frames = MsgpackEncoder().encode(_notice(ExitCode.OOM))
    outputs = MsgpackDecoder(record_outputs_class(OmniEngineCoreOutputs)).decode(frames)
    assert decode(outputs.omni_error).error_type == "InternalServerError"
    assert outputs.omni_error_exit == ExitCode.OOM


def test_a_refused_requests_output_carries_its_record_and_reads_as_before_without_the_plugin() -> None:
    """What `_handle_request_preproc_error`'s wrap sends: vLLM's `FinishReason.ERROR` with the record's
    text as `stop_reason` (all a reader without the plugin sees), and the record for one with it."""
    from omni_errors.carry import carried
    from vllm.exceptions import VLLMValidationError
    from vllm.v1.engine import FinishReason

    details = classify(VLLMValidationError("no voice named 'alloy'", parameter="voice"), stage_id=1)
    outputs_cls = record_outputs_class(OmniEngineCoreOutputs)
    failed = outputs_cls.output_class(
        "r-1", [], finish_reason=FinishReason.ERROR, stop_reason=details.message, omni_error=encode(details)
    )
    frames = MsgpackEncoder().encode(outputs_cls(finished_requests=["r-1"], outputs=[failed]))
    plain = MsgpackDecoder(OmniEngineCoreOutputs).decode(frames).outputs[0]
    assert (plain.finish_reason, plain.stop_reason) == (FinishReason.ERROR, "no voice named 'alloy'")
    value = carried(MsgpackDecoder(outputs_cls).decode(frames).outputs[0])
    assert value is not None and value.details == details
    assert (value.details.status_code, value.details.parameter) == (400, "voice")


def test_the_client_keeps_what_its_engine_said_it_died_of() -> None:
    """`StageEngineCoreClientBase.__init__`'s wrap reads every message its own decoder decodes."""
    decoder = MsgpackDecoder(record_outputs_class(OmniEngineCoreOutputs))

    class Client:  # what the wrap needs of vLLM's client: the decoder its output task holds
        def __init__(self) -> None:
            self.decoder = decoder

    Client.__init__ = make_client_init(SimpleNamespace(), Client.__init__)  # type: ignore[method-assign]
    client = Client()
    decoder.decode(MsgpackEncoder().encode(record_outputs_class(OmniEngineCoreOutputs)(engine_index=0)))
    assert getattr(client, "last_fatal", None) is None  # an ordinary batch says nothing
    decoder.decode(MsgpackEncoder().encode(_notice(ExitCode.OOM)))
    assert client.last_fatal.exit_code == ExitCode.OOM  # type: ignore[attr-defined]
    assert client.last_fatal.details.fatal  # type: ignore[attr-defined]


def test_a_lost_replicas_answer_while_its_stage_serves_on_is_a_503_not_a_fatal_record() -> None:
    message_cls = record_message_class(ErrorMessage)
    with stage_serves_on():
        lost = message_cls(error="EngineCore encountered an issue.", fatal=True, request_id="r-1", stage_id=1)
    assert (lost.details.status_code, lost.details.fatal, lost.details.stage_id) == (503, False, 1)
    assert (lost.status_code, lost.fatal, lost.error_type) == (503, False, "ServiceUnavailableError")  # flat too
    dead = message_cls(error="EngineCore encountered an issue.", fatal=True, request_id="r-1", stage_id=1)
    assert dead.details.fatal and dead.fatal  # outside: the stage has no live replica, the answer is fatal
