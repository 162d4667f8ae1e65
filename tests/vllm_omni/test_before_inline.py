"""vLLM-Omni 0.30 as released (plugin disabled), inline diffusion stage: today's behaviour.

Each test here has its twin in `test_after_inline.py`, run with the plugin enabled.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from omni_server import OmniServer, error_of, serve


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OmniServer]:
    yield from serve(tmp_path_factory, plugin=False, subprocess_stage=False)


def test_oom_is_one_request_500_with_allocation_figures_and_the_stage_keeps_serving(server: OmniServer) -> None:
    """Seed 003, behaviour 3: an OOM by type becomes a per-request 500; the stage serves on."""
    response = server.images("a cat [fault:oom]")
    assert response.status_code == 500
    assert re.search(r"\d+\.\d+ GiB", error_of(response)["message"]), "the allocation figures reach the client"
    assert server.images("a cat").status_code == 200
    assert server.proc is not None and server.proc.poll() is None


def test_chat_route_answers_internal_error_as_500_typed_bad_request_with_paths(server: OmniServer) -> None:
    """Behaviour 4: an internal failure on the diffusion chat route: 500, but `type` says client fault."""
    response = server.chat("a cat [fault:value]")
    assert response.status_code == 500
    error = error_of(response)
    assert error["type"] == "BadRequestError"
    assert "/home/" in error["message"], "the checkpoint's home path reaches the client"


def test_guardrail_rejection_is_counted_as_a_stage_error(server: OmniServer) -> None:
    """Behaviour 6: a 422 guardrail rejection lands in requests_failed_total{reason="stage_error"}."""
    before = server.metric("vllm_omni:requests_failed_total", reason="stage_error")
    response = server.chat("a cat [fault:guardrail]")
    assert response.status_code == 422
    assert server.metric("vllm_omni:requests_failed_total", reason="stage_error") == before + 1
