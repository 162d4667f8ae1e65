"""The plugin enabled, diffusion stage in StageDiffusionProc (twin of `test_before_subprocess.py`).

The record crosses the ZMQ hop in the proc's error frames. The last test ends the server.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import DEAD_MESSAGE
from omni_errors_tools.chaos.harness import LEAKS
from omni_server import UPSTREAM_TREE, OmniServer, assert_clean_exit, error_of, serve, upstreamed_logged


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OmniServer]:
    yield from serve(tmp_path_factory, plugin=True, subprocess_stage=True)


def test_stage_errors_cross_the_zmq_hop_with_their_record(server: OmniServer) -> None:
    """Status, type, stage and request id survive StageDiffusionProc -> client -> orchestrator -> HTTP."""
    assert upstreamed_logged(server) is (UPSTREAM_TREE is not None)  # make upstream-test: the series' tree
    internal = server.chat("a cat [fault:value]")
    assert internal.status_code == 500
    error = error_of(internal)
    assert (error["code"], error["type"], error["stage_id"]) == (500, "InternalServerError", 0)
    assert error["request_id"] and not LEAKS.search(internal.text)
    rejected = server.chat("a cat [fault:guardrail]")
    assert rejected.status_code == 422
    assert (error_of(rejected)["type"], error_of(rejected)["stage_id"]) == ("UnprocessableEntityError", 0)
    assert server.images("a cat").status_code == 200


def test_fatal_executor_failure_answers_every_request_and_exits_80(server: OmniServer) -> None:
    """Seed 001 fixed: every in-flight request is answered, the proc stops, the server exits 80."""
    responses = server.in_order(["a dog [fault:slow]", "a cat [fault:fatal]", "a bird", "a fish"], timeout=30)
    assert [r.status_code for r in responses] == [200, 500, 500, 500]
    assert all(error_of(r)["message"] == DEAD_MESSAGE for r in responses[1:])
    assert server.wait_exit(30) == ExitCode.FATAL_ENGINE
    assert_clean_exit(server)
