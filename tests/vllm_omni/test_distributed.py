"""The head's rejoin windows (`omni_errors.vllm_omni.distributed`), without a server.

The windows drive what a multi-node head answers while a stage has no replica; the whole policy
on the real processes is tests/vllm_omni/test_multinode_*.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import fatal_record
from omni_errors.server.admission import RETRY_AFTER_S
from omni_errors.vllm_omni.distributed import DEFAULT_WINDOW_S, Rejoin, unavailable_answer
from omni_errors.vllm_omni.settings import WINDOW_ENV

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


def test_a_refused_request_is_told_503_with_its_stage() -> None:
    details = unavailable_answer(2, "req-1")
    assert (details.category, details.status_code, details.error_type) == ("server", 503, "ServiceUnavailableError")
    assert (details.stage_id, details.request_id, details.fatal) == (2, "req-1", False)


def _window_in_a_process(value: str | None) -> tuple[float, str]:
    env = {k: v for k, v in os.environ.items() if k != WINDOW_ENV}
    if value is not None:
        env[WINDOW_ENV] = value
    probe = "import json; from omni_errors.vllm_omni.distributed import rejoin; print(json.dumps(rejoin().window_s))"
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=120)
    return json.loads(done.stdout), done.stderr


def test_the_window_is_read_from_the_environment_and_a_bad_value_says_so() -> None:
    assert _window_in_a_process(None)[0] == DEFAULT_WINDOW_S
    assert _window_in_a_process("7.5")[0] == 7.5
    for bad in ("soon", "-1", "nan", "0"):
        window, stderr = _window_in_a_process(bad)
        assert window == DEFAULT_WINDOW_S
        assert f"{WINDOW_ENV}={bad!r} is not a positive number of seconds" in stderr
