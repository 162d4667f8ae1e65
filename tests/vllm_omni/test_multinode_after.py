"""vLLM-Omni's multi-node mode with the plugin on the head: a head and `--headless` stages on two hosts.

One head for the module, with a long rejoin window: the first remote stage (with the plugin) is
cut off, and a second one registers and restores service while the OpenAI SDK retries a request.
The second runs without the plugin (a mixed deployment: its records are read from the flat fields,
and the head's links alone watch it). The sockets are plaintext here; CURVE, a SIGKILL and the
exit codes of both hosts are test_multinode_fatal.py's. Bounds are generous for a loaded CI
machine; the strict figures are the chaos report's (`omni-errors chaos --target vllm-omni`, the
`mn-` scenarios).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from multinode import HTTP_PORT, MODEL, STARTUP_TIMEOUT, Deployment, deployment
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.render.http import RETRY_AFTER_S
from omni_server import error_of

WINDOW = 600.0
DETECTED = 15.0  # fault -> every in-flight request answered (target: 2 s + 1 s; slack for load)
STAGE_EXIT = 60.0  # a remote stage's launcher ends after its proc (target: 5 s)
HEAD_EXIT = 60.0  # Ctrl+C -> the head has exited (target: 3 s)
SDK_RETRIES = 1000  # more than STARTUP_TIMEOUT allows at the 2 s hint: the test's deadline ends them


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    yield from deployment(tmp_path_factory, "on", plugin=True, window=WINDOW)


def _answered(dep: Deployment, fault: Callable[[], object]) -> list[tuple[httpx.Response, float]]:
    """Two requests in flight (3 s each, one after the other), then `fault()`: each answer, with the
    seconds it came after the fault."""
    futures = dep.in_flight(["a cat [fault:hold]", "a dog [fault:hold]"])
    faulted = time.monotonic()
    fault()
    answers = []
    for future in futures:
        answer, at = future.result()
        assert isinstance(answer, httpx.Response), f"no answer: {answer!r}"
        answers.append((answer, at - faulted))
    return answers


def _assert_lost_replica_answers(answers: list[tuple[httpx.Response, float]]) -> None:
    print(f"in-flight requests answered {', '.join(f'{after:.2f}' for _, after in answers)} s after the fault")
    for answer, after in answers:
        assert answer.status_code == 500, answer.text
        error = error_of(answer)
        assert error["stage_id"] == 0 and error["request_id"]
        assert after < DETECTED, f"answered {after:.2f}s after the fault"


def test_a_plaintext_deployment_is_logged_loudly(dep: Deployment) -> None:
    assert dep.head is not None
    assert "multi-node sockets are plaintext and unauthenticated" in dep.head.log()


def test_a_remote_stage_error_reaches_the_client_as_on_one_host(dep: Deployment) -> None:
    response = dep.images("a cat [fault:value]")
    assert response.status_code == 500
    error = error_of(response)
    assert error["type"] == "InternalServerError"
    assert error["stage_id"] == 0 and error["request_id"]
    assert "/home/" not in error["message"]
    assert dep.images("a cat").status_code == 200


def test_a_cut_is_seen_on_both_hosts_and_the_stage_refuses_requests_until_one_registers(dep: Deployment) -> None:
    remote = dep.remotes[-1]

    def cut() -> None:
        dep.net.drop(dep.net.a, 100)
        dep.net.drop(dep.net.b, 100)

    try:
        _assert_lost_replica_answers(_answered(dep, cut))
        refused = dep.images("a bird")
        assert refused.status_code == 503
        assert 0 < int(refused.headers["Retry-After"]) <= WINDOW
        assert error_of(refused)["stage_id"] == 0
        assert dep.get("/health").status_code == 503
        assert remote.wait_exit(STAGE_EXIT) == ExitCode.LINK_LOST  # the remote side ended itself
    finally:
        dep.net.undrop(dep.net.a)
        dep.net.undrop(dep.net.b)


class _GiveUp(BaseException):
    """Ends the SDK's retries from its request hook (not an `Exception`: the SDK would retry that)."""


def test_the_openai_sdks_retries_succeed_once_a_replica_registers(dep: Deployment) -> None:
    """Issue 24: a real client's own retries. The OpenAI SDK (`max_retries`) asks for an image while the
    stage has no replica: it honours each 503's `Retry-After`, the short hint (never the window), and
    its request succeeds once a replica (the next, without the plugin) registers."""
    seen: list[tuple[int, str | None]] = []
    stop = threading.Event()
    give_up = time.monotonic() + STARTUP_TIMEOUT

    def deadline(request: httpx.Request) -> None:
        if stop.is_set() or time.monotonic() > give_up:
            raise _GiveUp(f"the SDK still retried after {STARTUP_TIMEOUT:g} s: {seen[-5:]}")

    def generate() -> Any:
        from openai import OpenAI

        hooks: dict[str, list[Callable[..., None]]] = {
            "request": [deadline],
            "response": [lambda response: seen.append((response.status_code, response.headers.get("Retry-After")))],
        }
        with httpx.Client(timeout=30.0, event_hooks=hooks) as http:
            url = f"http://127.0.0.1:{HTTP_PORT}/v1"
            client = OpenAI(base_url=url, api_key="-", max_retries=SDK_RETRIES, http_client=http)
            return client.images.generate(model=MODEL, prompt="a cat", size="16x16")

    with ThreadPoolExecutor(1) as pool:
        answer = pool.submit(dep.in_a, generate)
        try:
            refused_by = time.monotonic() + 60
            while not any(status == 503 for status, _ in seen):  # refused before the replica starts
                assert time.monotonic() < refused_by and not answer.done(), f"no 503 first: {seen}"
                time.sleep(0.2)
            dep.start_remote(plugin=False)
            image = answer.result(timeout=STARTUP_TIMEOUT + 60)
        finally:
            stop.set()  # a failure above ends the SDK's retries too
    assert image.data and image.data[0].b64_json
    hints = [int(hint) for status, hint in seen if status == 503 and hint is not None]
    assert len(hints) == sum(status == 503 for status, _ in seen), seen
    assert all(0 < hint <= RETRY_AFTER_S for hint in hints), seen
    assert seen[-1][0] == 200
    print(f"the SDK was refused {len(hints)} times (Retry-After {sorted(set(hints))} s), then served")


def test_a_stage_without_the_plugin_rejoins_and_its_errors_are_read_from_flat_fields(dep: Deployment) -> None:
    if len(dep.remotes) < 2:  # the SDK's case above starts it
        dep.start_remote(plugin=False)
    dep.wait_serving()
    assert dep.get("/health").status_code == 200
    response = dep.images("a cat [fault:value]")
    assert response.status_code == 500
    error = error_of(response)
    assert error["stage_id"] == 0 and "/home/" not in error["message"]


def test_ctrl_c_ends_the_head_and_then_the_remote_stage(dep: Deployment) -> None:
    assert dep.head is not None
    remote = dep.remotes[-1]
    started = time.monotonic()
    dep.head.signal_group(signal.SIGINT)
    code = dep.head.wait_exit(HEAD_EXIT)
    head_s = time.monotonic() - started
    assert code is not None, f"the head still runs {HEAD_EXIT:g} s after Ctrl+C:\n{dep.head.tail()}"
    assert code not in (ExitCode.LINK_LOST, ExitCode.STAGE_LOST, ExitCode.FATAL_ENGINE, ExitCode.OOM)
    assert remote.wait_exit(STAGE_EXIT) is not None  # the head told it to stop (without the plugin: 0 or 1)
    print(f"Ctrl+C: the head exited {code} in {head_s:.2f}s, the remote stage {time.monotonic() - started:.2f}s")
