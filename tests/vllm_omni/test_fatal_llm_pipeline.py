"""The seeds' pipeline with the plugin: thinker -> talker -> code2wav, three replicas of the talker.

One server for the module, in this order: a request the talker refuses reaches the client as its
record (400, `param`, stage 1); vLLM-Omni's per-replica isolation holds (a fatal error in one
talker replica fails only its request, with a lost replica's 503, and the other replicas serve on),
also for a replica that hangs (its step deadline ends it, its request is answered); then a fatal
error in the last talker replica ends the pipeline: every request answered with a record naming
stage 1, exit 80 (seed 001's InductorError), no stage process or shared memory left.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.chaos.scenarios.vllm_omni_llm import TALK, LlmTarget
from omni_server import OmniServer, assert_clean_exit, error_of, llm_server

EXIT_BOUND_S = 60
#: Each stage's step deadline: above the slowest step a case asks for (`hold`, 3 s), short enough
#: that the hung replica's request is answered well inside a request's bound.
STEP_DEADLINE_S = 8.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OmniServer]:
    workdir = tmp_path_factory.mktemp("llm-on")
    target = LlmTarget(plugin=True, pipeline=TALK, replicas=((1, 3),), step_deadline_s=STEP_DEADLINE_S)
    with llm_server(workdir, target) as server:
        yield server


def test_a_request_the_talker_refuses_reaches_the_client_with_its_category_status_and_parameter(
    server: OmniServer,
) -> None:
    """The talker's own validation refuses it (vLLM's `VLLMValidationError`): 400 with `param`, naming
    stage 1; the pipeline serves on."""
    response = server.chat("hello [fault:client@1]", audio=True)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert (error["type"], error["param"], error["stage_id"]) == ("BadRequestError", "voice", 1)
    assert error["message"] == "This stage has no voice named 'alloy'"
    assert server.chat("hello", audio=True).status_code == 200


@pytest.mark.parametrize("fault", ["fatal", "hang"])
def test_one_talker_replica_dies_and_its_stage_serves_on(server: OmniServer, fault: str) -> None:
    """A replica whose forward never returns ends itself after its step deadline, as a dead one."""
    response = server.chat(f"hello [fault:{fault}@1]", audio=True)
    assert response.status_code == 503, response.text
    error = error_of(response)
    assert error["stage_id"] == 1 and error["type"] == "ServiceUnavailableError"
    assert response.headers.get("retry-after")
    for _ in range(2):  # they land on the surviving replicas
        served = server.chat("hello", audio=True)
        assert served.status_code == 200, served.text
        assert served.json()["choices"][0]["message"]["audio"]["data"]
    assert server.get("/health").status_code == 200


def test_the_last_talker_replica_dies_and_the_pipeline_ends_with_80(server: OmniServer) -> None:
    """The first request is in code2wav (3 s) when the second kills the talker, the third follows."""
    responses = server.chats_in_order(["hello [fault:hold@2]", "hello [fault:fatal@1]", "hello"], timeout=60)
    assert [r.status_code for r in responses] == [500, 500, 500], [r.text for r in responses]
    assert [error_of(r)["stage_id"] for r in responses] == [1, 1, 1]
    assert server.wait_exit(EXIT_BOUND_S) == ExitCode.FATAL_ENGINE
    assert_clean_exit(server)
