"""vLLM-Omni's multi-node mode on an LLM stage, plugin on, CURVE on: a `--headless` LLM stage
killed, then cut off, on the other side of a network namespace.

The head serves the one-stage `omni_errors_chat` pipeline, whose stage 0 is remote-only: two
`--headless` stages on the other host register a replica each, vLLM's EngineCore in each one's
process over the fake LLM engine. Their links are vLLM's own engine-core sockets (the head binds
them, the stage connects), watched from both ends by the plugin. A SIGKILL ends one replica with
requests in flight: they are answered at once, its launcher exits 85, and the other replica serves
on. A cut then loses the last one: its requests are answered at once, it ends itself with 86, new
requests get 503 with `Retry-After` while the (short) window is open, and the head ends with 86
when it passes. Bounds are generous for a loaded CI machine; the strict figures are printed.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import httpx
import pytest
from multinode import Deployment, deployment, make_key_dirs
from omni_errors.fatal.exitcodes import ExitCode
from omni_server import error_of

WINDOW = 10.0
DETECTED = 15.0  # a fault -> every request in flight on its replica answered (target: 2 s; slack for load)
STAGE_EXIT = 60.0
HEAD_EXIT = WINDOW + 60.0  # the window, then a bounded shutdown (slack for a loaded machine)


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    head_keys, stage_keys, _ = make_key_dirs(tmp_path_factory.mktemp("keys"))
    yield from deployment(
        tmp_path_factory,
        "llm",
        plugin=True,
        head_keys=head_keys,
        stage_keys=stage_keys,
        window=WINDOW,
        remotes=2,
        llm=True,
    )


def _answers(futures: list[object], since: float) -> list[tuple[int, float]]:
    """Each request's status, with when it came (seconds after `since`)."""
    answers = []
    for future in futures:
        answer, at = future.result()  # type: ignore[attr-defined]
        assert isinstance(answer, httpx.Response), f"no answer: {answer!r}"
        if answer.status_code != 200:
            error = error_of(answer)
            assert error["stage_id"] == 0 and error["request_id"], error
        answers.append((answer.status_code, at - since))
    return answers


def test_an_llm_stage_on_another_host_answers_over_curve_links(dep: Deployment) -> None:
    assert dep.head is not None
    for node in (dep.head, *dep.remotes):
        assert "CURVE on every TCP socket of the deployment" in node.log(), node.tail()
        assert "plaintext" not in node.log()
    answer = dep.chat("hi there")
    assert answer.status_code == 200, answer.text
    assert answer.json()["choices"][0]["message"]["content"]


def test_a_sigkilled_llm_stage_answers_its_requests_at_once_and_the_other_serves_on(dep: Deployment) -> None:
    victim = dep.remotes[0]
    futures = dep.in_flight([f"hi {i} [fault:hold]" for i in range(6)], gap=0.2)
    killed = time.monotonic()
    os.kill(victim.stage_proc(), signal.SIGKILL)
    answers = _answers(futures, killed)
    assert {status for status, _ in answers} <= {200, 500}, answers
    late = [after for status, after in answers if status == 500]
    print(f"the killed replica's requests were answered {', '.join(f'{t:.2f}' for t in late)} s after the SIGKILL")
    assert all(after < DETECTED for after in late), answers
    assert victim.wait_exit(STAGE_EXIT) == ExitCode.STAGE_LOST
    for _ in range(3):
        assert dep.chat("hi").status_code == 200
    assert dep.get("/health").status_code == 200


def test_a_cut_is_seen_on_both_hosts_and_the_head_ends_when_no_replica_returns(dep: Deployment) -> None:
    assert dep.head is not None
    last = dep.remotes[1]
    futures = dep.in_flight(["hi [fault:hold]", "hi again [fault:hold]"], gap=0.2)
    cut = time.monotonic()
    dep.net.drop(dep.net.a, 100)
    dep.net.drop(dep.net.b, 100)
    try:
        answers = _answers(futures, cut)
        print(f"its requests were answered {', '.join(f'{t:.2f}' for _, t in answers)} s after the cut")
        assert [status for status, _ in answers] == [500, 500]
        assert all(after < DETECTED for _, after in answers), answers
        refused = dep.chat("hi")
        assert refused.status_code == 503 and 0 < int(refused.headers["Retry-After"]) <= WINDOW, refused.text
        assert error_of(refused)["stage_id"] == 0
        assert last.wait_exit(STAGE_EXIT) == ExitCode.LINK_LOST  # the remote side ended itself
    finally:
        dep.net.undrop(dep.net.a)
        dep.net.undrop(dep.net.b)
    started = time.monotonic()
    assert dep.head.wait_exit(HEAD_EXIT) == ExitCode.LINK_LOST, dep.head.tail()
    print(f"the head exited {time.monotonic() - started:.2f}s after the refused request")
