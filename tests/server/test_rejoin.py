"""The head's rejoin windows (`omni_errors.server.rejoin`), without a server.

The windows drive what a multi-node head answers while a stage has no replica; the whole policy
on the real processes is tests/vllm_omni/test_multinode_*.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

from omni_errors import OmniErrorDetails
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.semantics.core_table import fatal_record, unavailable_record
from omni_errors.semantics.exceptions import OmniServerError
from omni_errors.server.rejoin import (
    Rejoin,
    rebuilt,
    refuse_new_request,
    rejoin,
    retry_after,
    unavailable_answer,
)
from omni_errors.settings import REJOIN_WINDOW

EXPIRY_BOUND = 30.0  # only keeps a broken window from hanging the suite


def test_a_window_opens_once_and_a_replica_closes_it() -> None:
    rejoin = Rejoin(window_s=60.0)
    assert rejoin.outage() is None and rejoin.outage(0) is None
    first = rejoin.open(0, fatal_record(stage_id=0), ExitCode.LINK_LOST)
    again = rejoin.open(0, fatal_record(stage_id=0), ExitCode.OOM)  # the window already runs: kept
    assert again is first and first.code is ExitCode.LINK_LOST
    assert rejoin.outage() is first and rejoin.outage(1) is None
    assert 0 < first.seconds_left() <= 60
    assert first.retry_after() == RETRY_AFTER_S  # the short hint: a retry may find a replica back
    assert rejoin.expired(0) is None
    assert rejoin.close(0) is first
    assert rejoin.outage(0) is None and rejoin.close(0) is None


def test_the_earliest_window_is_the_one_a_new_request_is_told_about() -> None:
    rejoin = Rejoin(window_s=60.0)
    early = rejoin.open(1, fatal_record(stage_id=1), ExitCode.LINK_LOST)
    rejoin.window_s = 600.0
    rejoin.open(0, fatal_record(stage_id=0), ExitCode.LINK_LOST)
    assert rejoin.outage() is early


def test_a_window_expires() -> None:
    rejoin = Rejoin(window_s=0.05)
    opened = rejoin.open(0, fatal_record(stage_id=0), ExitCode.FATAL_ENGINE)
    deadline = time.monotonic() + EXPIRY_BOUND
    while rejoin.expired(0) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert rejoin.expired(0) is opened
    assert opened.retry_after() == opened.seconds_left() == 1  # never "retry now", never past the window


def test_a_window_that_passes_without_a_replica_ends_the_pipeline_and_a_closed_one_does_not() -> None:
    ended: list[tuple[int | None, ExitCode]] = []

    async def end(details: OmniErrorDetails, code: ExitCode) -> None:
        ended.append((details.stage_id, code))

    async def windows() -> None:
        rejoin = Rejoin(window_s=0.2)
        # Stage 1's window opens first, so its check runs first: by the time stage 0's ends the
        # pipeline, stage 1's has run and found its replica back.
        rejoin.wait_for_replica(1, fatal_record(stage_id=1), ExitCode.OOM, end)
        rejoin.close(1)  # stage 1's replica registered in time
        rejoin.wait_for_replica(0, fatal_record(stage_id=0), ExitCode.LINK_LOST, end)
        deadline = time.monotonic() + EXPIRY_BOUND
        while not ended and time.monotonic() < deadline:
            await asyncio.sleep(0.05)

    asyncio.run(windows())
    assert ended == [(0, ExitCode.LINK_LOST)]


def test_a_refused_request_is_told_503_with_its_stage() -> None:
    details = unavailable_answer(2, "req-1")
    assert (details.category, details.status_code, details.error_type) == ("server", 503, "ServiceUnavailableError")
    assert (details.stage_id, details.request_id, details.fatal) == (2, "req-1", False)


def _window_in_a_process(value: str | None) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k != REJOIN_WINDOW.name}
    if value is not None:
        env[REJOIN_WINDOW.name] = value
    probe = "import json; from omni_errors.server.rejoin import rejoin; print(json.dumps(rejoin().window_s))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    return json.loads(done.stdout), done.stderr


def test_the_window_is_read_from_the_environment_and_a_bad_value_says_so() -> None:
    assert _window_in_a_process(None)[0] == REJOIN_WINDOW.default
    assert _window_in_a_process("7.5")[0] == 7.5
    for bad in ("soon", "-1", "nan", "0"):
        window, stderr = _window_in_a_process(bad)
        assert window == REJOIN_WINDOW.default
        assert f"{REJOIN_WINDOW.name}={bad!r} is not a positive number of seconds" in stderr


def test_a_503_gets_retry_after_only_where_the_stages_decide() -> None:
    """On one host nothing waits for a replica: no `Retry-After` from the windows; on a multi-node head
    (`defer_to_stages`) a 503 gets the short hint, and other statuses none."""
    refused = unavailable_record("no replica", stage_id=0)
    try:
        assert retry_after(refused) is None
        fatal.defer_to_stages()
        assert retry_after(refused) == min(RETRY_AFTER_S, REJOIN_WINDOW.default)
        assert retry_after(fatal_record(stage_id=0)) is None
    finally:
        fatal.reset()


def _refusal() -> BaseException | None:
    try:
        refuse_new_request()
    except Exception as exc:  # the refusal under test
        return exc
    return None


def test_a_new_request_is_refused_only_while_the_server_cannot_serve_it() -> None:
    try:
        assert _refusal() is None  # one host, nothing fatal: served
        fatal.defer_to_stages()
        assert _refusal() is None  # a multi-node head, every stage served
        rejoin().open(3, fatal_record(stage_id=3), ExitCode.LINK_LOST)
        refused = _refusal()
        assert isinstance(refused, OmniServerError)
        assert (refused.details.status_code, refused.details.stage_id) == (503, 3)
        assert "Stage 3 has no live replica" in refused.details.message
        assert refused.retry_after == RETRY_AFTER_S
        rejoin().close(3)
        fatal.declare(fatal_record(stage_id=1), ExitCode.FATAL_ENGINE)
        ended = _refusal()
        assert ended is not None and getattr(ended, "details", None) == fatal.declared()
    finally:
        rejoin().close(3)
        fatal.reset()


def test_once_the_pipeline_ended_a_requests_server_error_is_its_fatal_record() -> None:
    """A request the stopping orchestrator had not taken yet is failed with a generic error of vLLM-Omni's
    ("Orchestrator died unexpectedly"): it ended with the pipeline, and is told so with the record."""
    generic = OmniErrorDetails("Orchestrator died", "server", 500, "InternalServerError", request_id="r-9")
    refused = OmniErrorDetails("bad voice", "client", 400, "BadRequestError", parameter="voice", request_id="r-8")
    try:
        assert getattr(rebuilt(generic), "details", None) == generic  # nothing fatal yet: its own record
        fatal.declare(fatal_record(stage_id=1), ExitCode.FATAL_ENGINE)
        ended = getattr(rebuilt(generic), "details", None)
        assert ended is not None and ended.fatal and (ended.stage_id, ended.request_id) == (1, "r-9")
        assert getattr(rebuilt(refused), "details", None) == refused  # a client's own error stays its own
    finally:
        fatal.reset()
