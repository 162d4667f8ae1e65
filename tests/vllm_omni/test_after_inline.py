"""The plugin enabled, inline diffusion stage: the fixed behaviour (twin of `test_before_inline.py`).

On the series' tree the same cases run twice: with the plugin installed (`make pytest-upstream`),
and with only the core (`make pytest-upstream-core`: vLLM loads no plugin of omni-errors), where
vLLM-Omni's own code, calling the core, gives every fixed behaviour.

The last test ends the server (a fatal failure must), so it stays last in this module.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.semantics.core_table import DEAD_MESSAGE
from omni_errors_tools.chaos.harness import LEAKS
from omni_server import CORE_ONLY, UPSTREAM_TREE, OmniServer, assert_clean_exit, error_of, serve, upstreamed_logged


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OmniServer]:
    yield from serve(tmp_path_factory, plugin=True, subprocess_stage=False)


def test_the_plugins_decision_is_logged_and_on_metrics(server: OmniServer) -> None:
    if CORE_ONLY:  # no plugin of ours loaded: nothing decided, nothing said
        assert server.metric("omni_errors_vllm_omni_plugin_info") == 0
        assert "omni-errors: plugin" not in server.log()
        return
    assert server.metric("omni_errors_vllm_omni_plugin_info", decision="enabled", vllm_omni="0.30.0") == 1
    assert "omni-errors: plugin enabled for vllm-omni 0.30.0" in server.log()
    assert upstreamed_logged(server) is (UPSTREAM_TREE is not None)  # make upstream-test: the series' tree


def test_chat_route_internal_error_is_500_internal_server_error_sanitized(server: OmniServer) -> None:
    """Behaviour 4 fixed: a stage-side ValueError is a server fault, typed so, with no paths."""
    response = server.chat("a cat [fault:value]")
    assert response.status_code == 500
    error = error_of(response)
    assert (error["code"], error["type"], error["stage_id"]) == (500, "InternalServerError", 0)
    assert error["request_id"]
    assert not LEAKS.search(response.text), response.text


@pytest.mark.parametrize("route", ["chat", "images"])
def test_guardrail_rejection_keeps_its_422(server: OmniServer, route: str) -> None:
    """vLLM-Omni's OmniClientError keeps its status and type on every route."""
    response = server.chat("a cat [fault:guardrail]") if route == "chat" else server.images("a cat [fault:guardrail]")
    assert response.status_code == 422
    error = error_of(response)
    assert (error["code"], error["type"]) == (422, "UnprocessableEntityError")
    assert error["message"] == "The prompt was rejected by the content guardrail"


def test_guardrail_rejection_is_counted_as_a_client_error(server: OmniServer) -> None:
    """Behaviour 6 fixed: failures are counted by category."""
    stage_errors = server.metric("vllm_omni:requests_failed_total", reason="stage_error")
    client_errors = server.metric("vllm_omni:requests_failed_total", reason="client_error")
    omni_client = server.metric("omni_errors_total", category="client", status="422")
    assert server.chat("a cat [fault:guardrail]").status_code == 422
    assert server.metric("vllm_omni:requests_failed_total", reason="stage_error") == stage_errors
    assert server.metric("vllm_omni:requests_failed_total", reason="client_error") == client_errors + 1
    assert server.metric("omni_errors_total", category="client", status="422") == omni_client + 1


def test_a_503_on_the_chat_route_keeps_its_retry_after(server: OmniServer) -> None:
    """The chat route renders a failure through `_create_error_response` (the plugin's, or vLLM-Omni's
    own on the series' tree) and answers `JSONResponse(body)`: a sleeping stage's `Retry-After`
    still reaches the client."""
    stages = {"stage_ids": [0]}
    slept = httpx.post(f"{server.url}/v1/omni/sleep", json={**stages, "level": 1}, timeout=30.0)
    assert slept.status_code == 200, slept.text
    try:
        response = server.chat("a cat", timeout=30.0)
    finally:
        woken = httpx.post(f"{server.url}/v1/omni/wakeup", json=stages, timeout=30.0)
    assert response.status_code == 503, response.text
    assert (error_of(response)["type"], error_of(response)["stage_id"]) == ("ServiceUnavailableError", 0)
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)
    assert woken.status_code == 200, woken.text
    assert server.chat("a cat").status_code == 200


def test_oom_answers_every_request_and_ends_the_server_with_81(server: OmniServer) -> None:
    """Seed 003 fixed: OOM by type is fatal: every in-flight request answered, the server exits 81."""
    responses = server.in_order(["a dog [fault:slow]", "a cat [fault:oom]", "a bird", "a fish"])
    assert [r.status_code for r in responses] == [200, 500, 500, 500]
    for response in responses[1:]:
        error = error_of(response)
        assert (error["message"], error["type"]) == (DEAD_MESSAGE, "InternalServerError")
    assert server.wait_exit(30) == ExitCode.OOM
    assert_clean_exit(server)
