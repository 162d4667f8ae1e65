"""vLLM-Omni 0.30 as released (plugin disabled) on LLM stages: thinker -> talker -> code2wav.

The seeds' own pipeline and stage type: vLLM's EngineCore in each stage's process. A fatal error in
the talker's EngineCore fails the request, but nothing ends the server: it stays up without stage 1,
its other stages running, answering 503 on /health and 500 to every later request, so no supervisor
restarts it (the OOM RFC's requirements 2 and 4). The module shares one server; its last test ends it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from omni_errors_tools.chaos.scenarios.vllm_omni_llm import LlmTarget
from omni_server import OmniServer, error_of, llm_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OmniServer]:
    workdir = tmp_path_factory.mktemp("llm-off")
    with llm_server(workdir, LlmTarget(plugin=False)) as server:
        yield server


def test_the_pipeline_answers_text_and_audio(server: OmniServer) -> None:
    response = server.chat("hello", audio=True)
    assert response.status_code == 200, response.text
    message = response.json()["choices"][0]["message"]
    assert message["content"] == "ok"
    assert message["audio"]["data"]  # code2wav's waveform, as WAV


def test_a_request_the_talker_refuses_is_a_500_without_its_status_or_parameter(server: OmniServer) -> None:
    """vLLM 0.30 answers a request its stage refused with a bare `FinishReason.ERROR`: the client's
    400 (`param` "voice") becomes a 500 "Stage request failed"."""
    response = server.chat("hello [fault:client@1]", audio=True)
    assert response.status_code == 500
    assert "voice" not in response.text
    assert server.chat("hello", audio=True).status_code == 200


def test_a_fatal_error_in_the_talker_fails_the_request_and_leaves_the_server_up_without_it(
    server: OmniServer,
) -> None:
    """Seed 001 on LLM stages: the request is answered 500 naming stage 1 (as `error_stage_id`, not the
    RFC's `stage_id`); the server does not end, /health is 503 and every later request is a 500."""
    response = server.chat("hello [fault:fatal@1]", audio=True)
    assert response.status_code == 500
    assert error_of(response)["error_stage_id"] == 1
    assert server.get("/health").status_code == 503
    later = server.chat("hello again", audio=True)
    assert later.status_code == 500
    assert server.wait_exit(5) is None  # nothing ends it: no supervisor restarts it


def test_ctrl_c_still_ends_it(server: OmniServer) -> None:
    server.interrupt()
    assert server.wait_exit(120) is not None
