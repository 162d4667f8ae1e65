"""vLLM-Omni 0.30's multi-node mode as released (the plugin disabled on the head): what each case does today.

The first remote stage runs without the plugin too; the second has it (a mixed deployment: a
plugin-less head reads its records' flat fields and logs the frames it does not know). The last
cases wedge the head (seed 001 across hosts: the orchestrator blocks for good in a send to the
dead stage), so they stay last; a fatal failure can wedge it too, so it has its own head
(test_multinode_before_fatal.py).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import httpx
import msgspec
import pytest
import zmq
from multinode import MASTER_PORT, Deployment, deployment
from omni_server import error_of

COORDINATOR_TIMEOUT = 30.0  # vLLM-Omni's --omni-heartbeat-timeout default
UNANSWERED = 20.0


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    yield from deployment(tmp_path_factory, "off", plugin=False)


def test_a_remote_stage_error_reaches_the_client_as_internal_text_without_its_stage(dep: Deployment) -> None:
    response = dep.images("a cat [fault:value]")
    assert response.status_code == 500
    error = error_of(response)
    assert error["message"].startswith("Image generation failed: size mismatch")  # the stage's own words
    assert error.get("stage_id") is None


def test_any_peer_that_reaches_the_head_can_register_a_replica(dep: Deployment) -> None:
    address = f"tcp://{dep.net.addr_a}:{MASTER_PORT}"

    def register() -> dict[str, object] | None:
        ctx = zmq.Context()
        try:
            peer = ctx.socket(zmq.DEALER)
            peer.linger = 0
            peer.connect(address)
            peer.send(msgspec.msgpack.encode({"stage_id": 0, "replica_id": -1, "stage_config": None}))
            return msgspec.msgpack.decode(peer.recv()) if peer.poll(10_000) else None
        finally:
            ctx.destroy(linger=0)

    reply = dep.in_b(register)
    assert reply is not None, "no registration reply"
    assert str(reply["input_address"]).startswith("tcp://")  # where the head would push it prompts


def test_an_oom_is_one_request_500_and_the_remote_stage_serves_on(dep: Deployment) -> None:
    response = dep.images("a cat [fault:oom]")
    assert response.status_code == 500
    assert "GiB" in error_of(response)["message"]
    assert dep.images("a cat").status_code == 200


def test_a_cut_is_answered_only_after_the_coordinator_timeout(dep: Deployment) -> None:
    remote = dep.remotes[-1]
    (pending,) = dep.in_flight(["a cat [fault:hold]"])
    dep.net.drop(dep.net.a, 100)
    dep.net.drop(dep.net.b, 100)
    cut = time.monotonic()
    try:
        answer, at = pending.result()
        assert isinstance(answer, httpx.Response), answer
        assert answer.status_code == 500
        assert error_of(answer)["message"].endswith("stage replica disappeared")  # the coordinator's word
        assert at - cut > COORDINATOR_TIMEOUT * 0.8, f"answered {at - cut:.1f}s after the cut"
        assert remote.proc.poll() is None  # the remote side never noticed
    finally:
        dep.net.undrop(dep.net.a)
        dep.net.undrop(dep.net.b)
    remote.close()


def test_a_remote_stage_with_the_plugin_works_with_a_head_without_it(dep: Deployment) -> None:
    dep.start_remote(plugin=True)
    dep.wait_serving()
    response = dep.images("a cat [fault:value]")  # the flat fields are read; the record's keys are ignored
    assert response.status_code == 500
    assert dep.images("a cat").status_code == 200


def test_a_sigkilled_remote_stage_leaves_requests_unanswered_and_health_200(dep: Deployment) -> None:
    remote = dep.remotes[-1]
    (pending,) = dep.in_flight(["a cat [fault:hold]"], timeout=UNANSWERED)
    os.kill(remote.stage_proc(), signal.SIGKILL)
    answer, _ = pending.result()
    assert isinstance(answer, httpx.ReadTimeout), answer
    assert dep.get("/health").status_code == 200


def test_ctrl_c_does_not_end_the_head(dep: Deployment) -> None:
    assert dep.head is not None
    dep.head.signal_group(signal.SIGINT)
    # The orchestrator's thread waits in its send for good: the engine gives up joining it after 30 s,
    # and the interpreter then waits for it at exit. The module's teardown kills the head.
    assert dep.head.wait_exit(10) is None
