"""How a failure on the stage side is read (`omni_errors.carry`), with vLLM's own output classes.

Each piece of the LLM stages' hop is tested here with the real `EngineCoreOutput`,
`FinishReason.ERROR` and (vLLM >= 0.31) `RequestError`, and what a dying engine core says it died
of; this module runs in both environments (the whole route, on a real server: tests/vllm_omni/
test_fatal_llm*.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import torch
from omni_errors import OmniErrorDetails, encode
from omni_errors.carry import (
    EXIT_KEY,
    FRAME_KEY,
    Carried,
    carried,
    death_notice,
    died_of,
    failure_frame_fields,
    frame_fields,
    output_record,
    stage_failure,
)
from omni_errors.fatal import process as fatal_state
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.fatal.policy import classify_failure
from omni_errors.semantics.core_table import fatal_record
from vllm.v1.engine import EngineCoreOutput, FinishReason
from vllm.v1.engine.exceptions import EngineDeadError

try:
    from vllm.outputs import RequestError
except ImportError:  # vLLM 0.30: LLM stages report an error only as FinishReason.ERROR + text
    RequestError = None

needs_request_error = pytest.mark.skipif(RequestError is None, reason="vLLM 0.30 has no RequestError")


def test_a_stage_side_value_error_is_a_server_failure() -> None:
    details = stage_failure(ValueError("shape mismatch in /home/alice/model.safetensors"), stage_id=2).details
    assert (details.category, details.status_code, details.error_type, details.stage_id) == (
        "server",
        500,
        "InternalServerError",
        2,
    )
    assert "/home/alice" not in details.message


@pytest.mark.parametrize("raw", [ValueError("bad shape"), TypeError("bad type"), OverflowError("too big")])
def test_a_stage_side_raw_error_gets_one_answer_on_both_paths(raw: Exception) -> None:
    """The reference lifecycle (`classify_failure`) and vLLM-Omni (`stage_failure`) give one record."""
    lifecycle = classify_failure(raw, request_id="r1", stage_id=1)
    vllm_omni = stage_failure(raw, request_id="r1", stage_id=1)
    assert vllm_omni == Carried(lifecycle)
    assert (lifecycle.status_code, lifecycle.category, lifecycle.request_id) == (500, "server", "r1")


def test_oom_is_fatal_by_type_even_when_a_library_wraps_it() -> None:
    try:
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        except torch.OutOfMemoryError as exc:
            raise RuntimeError(f"Diffusion generation failed: {exc}") from exc
    except RuntimeError as wrapped:
        value = stage_failure(wrapped, request_id="r1")
    assert value.details.fatal and value.exit_code == ExitCode.OOM
    assert "GiB" not in value.details.message and value.details.request_id == "r1"


def test_llm_finish_reason_error_text_is_a_server_failure_of_its_stage() -> None:
    eco = EngineCoreOutput(
        request_id="r1",
        new_token_ids=[],
        finish_reason=FinishReason.ERROR,
        stop_reason="Timed out waiting for connector input after 30s",
    )
    details = output_record(eco, request_id="r1", stage_id=1, error=str(eco.stop_reason)).details
    assert (details.category, details.status_code, details.stage_id, details.request_id) == ("server", 500, 1, "r1")
    assert details.message == "Timed out waiting for connector input after 30s"


@needs_request_error
@pytest.mark.parametrize(
    ("code", "retryable", "expected"),
    [
        ("validation_error", False, ("client", 400, "BadRequestError")),
        ("internal", True, ("server", 503, "ServiceUnavailableError")),
    ],
)
def test_llm_request_error_keeps_its_meaning(code: str, retryable: bool, expected: tuple[str, int, str]) -> None:
    error = RequestError(code=code, message="max_tokens must be at least 1", retryable=retryable)
    eco = EngineCoreOutput(request_id="r1", new_token_ids=[], finish_reason=FinishReason.ERROR, error=error)
    details = output_record(eco, request_id="r1", stage_id=0, error="ignored: the RequestError wins").details
    assert (details.category, details.status_code, details.error_type) == expected
    assert (details.stage_id, details.request_id) == (0, "r1")


def test_a_record_in_a_diffusion_frame_wins_over_its_flat_fields() -> None:
    record = OmniErrorDetails("rejected", "client", 422, "UnprocessableEntityError", parameter="prompt", stage_id=0)
    frame = {"type": "error", "request_id": "r1", **frame_fields(Carried(record))}
    assert frame["status_code"] == 422 and frame[FRAME_KEY] == encode(record) and EXIT_KEY not in frame
    assert carried(frame) == Carried(record)
    frame["status_code"] = 400  # an old writer's guess: the record says otherwise
    assert output_record(frame, request_id="r1", stage_id=0).details.parameter == "prompt"


@pytest.fixture
def clean_fatal_state() -> Iterator[None]:
    fatal_state.reset()
    yield
    fatal_state.reset()


@pytest.mark.usefixtures("clean_fatal_state")
def test_an_error_frame_gets_the_record_of_the_failure_it_answers() -> None:
    try:
        raise ValueError("could not read /home/alice/ckpt/model.safetensors")
    except ValueError as exc:
        fields = failure_frame_fields(exc, request_id="r1")
    value = carried(fields)
    assert value is not None and EXIT_KEY not in fields
    assert (value.details.status_code, value.details.request_id, fields["status_code"]) == (500, "r1", 500)
    assert "/home/alice" not in fields["error"] and fields["error"] == value.details.message
    assert fatal_state.exit_code() is None


@pytest.mark.usefixtures("clean_fatal_state")
def test_a_fatal_error_frame_names_the_exit_code_that_wins_in_its_process() -> None:
    oom = failure_frame_fields(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"))
    assert oom[EXIT_KEY] == ExitCode.OOM and fatal_state.exit_code() == ExitCode.OOM
    dead = failure_frame_fields(EngineDeadError())  # the engine died of that OOM: 81 still wins
    assert dead[EXIT_KEY] == ExitCode.OOM and carried(dead) == Carried(carried(dead).details, ExitCode.OOM)  # type: ignore[union-attr]
    fatal_state.reset()
    assert failure_frame_fields(EngineDeadError())[EXIT_KEY] == ExitCode.FATAL_ENGINE


def test_a_peer_without_the_plugin_is_read_from_its_flat_fields() -> None:
    legacy = {
        "type": "error",
        "request_id": "r1",
        "error": "bad size",
        "status_code": 400,
        "error_type": "BadRequestError",
    }
    details = output_record(legacy, request_id="r1", stage_id=0).details
    assert (details.category, details.status_code, details.stage_id) == ("client", 400, 0)
    assert carried(legacy) is None
    assert carried({FRAME_KEY: b"not a frame"}) is None


_TORCH_OOM_TEXT = (
    "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which 3.12 GiB "
    "is free. Process 48213 has 76.02 GiB memory in use."
)


def test_a_stage_without_the_plugin_sends_oom_text_that_becomes_a_server_error_with_its_figures() -> None:
    """A stage process without the plugin sends only text: the record is a server 500, and the
    allocation figures stay (the sanitizer keeps them: a diagnostic, not a secret, as the sanitizer
    corpus marks them). Only a stage with the plugin classifies the OOM by its type."""
    from omni_errors.render import error_body

    legacy = {"type": "error", "request_id": "r1", "error": _TORCH_OOM_TEXT, "status_code": None}
    details = output_record(legacy, request_id="r1", stage_id=0).details
    assert (details.category, details.status_code, details.stage_id) == ("server", 500, 0)
    assert "Tried to allocate 20.00 GiB" in error_body(details)["error"]["message"]


def test_a_lost_replica_died_of_what_it_said_else_of_how_it_was_lost() -> None:
    said = fatal_record(stage_id=1)
    oom = Carried(said, ExitCode.OOM)
    assert died_of(oom, stage_id=1, remote=False) == died_of(oom, stage_id=1, remote=True) == (said, ExitCode.OOM)
    no_code = Carried(said)  # a death notice that names no code
    assert died_of(no_code, stage_id=1, remote=False)[1] is ExitCode.FATAL_ENGINE
    assert died_of(no_code, stage_id=1, remote=True)[1] is ExitCode.LINK_LOST
    silent = {  # nothing said: how the loss was reported decides
        "remote": died_of(None, stage_id=1, remote=True),
        "dead engine": died_of(None, stage_id=1, remote=False, error=SimpleNamespace(details=fatal_record(stage_id=1))),
        "vanished": died_of(None, stage_id=1, remote=False, error=EngineDeadError()),
    }
    assert silent == {
        "remote": (said, ExitCode.LINK_LOST),
        "dead engine": (said, ExitCode.FATAL_ENGINE),
        "vanished": (said, ExitCode.STAGE_LOST),
    }


def _inductor_error() -> BaseException:
    from torch._inductor.exc import InductorError

    return InductorError(RuntimeError("Triton compilation failed"), None)


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"), ExitCode.OOM),
        (_inductor_error, ExitCode.FATAL_ENGINE),
        (lambda: ValueError("bad tensor in /home/alice/model.safetensors"), ExitCode.FATAL_ENGINE),
        (lambda: None, ExitCode.FATAL_ENGINE),
    ],
    ids=["oom-81", "inductor-80", "anything-escaping-the-loop-80", "nothing-handled-80"],
)
@pytest.mark.usefixtures("clean_fatal_state")
def test_a_dead_engine_core_says_what_it_died_of_by_type(make: object, code: ExitCode) -> None:
    said = death_notice(make())  # type: ignore[operator]
    assert said.exit_code == code
    assert said.details.fatal and said.details.status_code == 500
    assert "/home/" not in said.details.message and "GiB" not in said.details.message
    assert fatal_state.exit_code() == code  # noted in the stage process's fatal state
