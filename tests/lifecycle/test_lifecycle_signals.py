"""Stages that die or hang, and signals to the supervising process."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from omni_errors.fatal.exitcodes import ExitCode

AR_SLOW = {"kind": "ar", "kwargs": {"step_delay": 0.02}}


def _hanging(marker: Path) -> dict[str, Any]:
    return {"kind": "ar", "kwargs": {"fault": "hang", "fault_after": 2, "fault_marker": str(marker)}}


def test_sigkill_of_a_stage_mid_stream_is_detected_and_answered(scenario: Any) -> None:
    run = scenario(
        {
            "stages": [AR_SLOW],
            "requests": 20,
            "request": {"prompt": [2], "max_tokens": 200},
            "action": {"sigkill_stage": 0, "after_outputs": 40},
            "config": {"startup_timeout": 240},
        }
    )
    answered = run.wait_event("answered", timeout=240)
    run.finish()
    assert run.proc.returncode == int(ExitCode.STAGE_LOST), run.stderr[-3000:]
    for r in answered["results"].values():
        assert (r["ok"], r["status"], r["fatal"], r["stage_id"]) == (False, 500, True, 0)
    t_kill = run.events["killed"]["t"]
    print(f"\n[sigkill] kill->all answered {max(r['t'] for r in answered['results'].values()) - t_kill:.3f}s")


def test_hung_stage_gets_504_then_is_declared_dead(scenario: Any, tmp_path: Path) -> None:
    run = scenario(
        {
            "stages": [_hanging(tmp_path / "hang")],
            "requests": 10,
            "request": {"prompt": [2], "max_tokens": 500},
            "config": {"startup_timeout": 240, "heartbeat_timeout": 1.0, "hang_grace": 1.0, "stop_timeout": 1.0},
            "wait_dead": True,
        }
    )
    answered = run.wait_event("answered", timeout=240)
    run.finish()
    assert run.proc.returncode == int(ExitCode.STAGE_HUNG), run.stderr[-3000:]
    for r in answered["results"].values():
        assert (r["ok"], r["status"], r["fatal"], r["stage_id"]) == (False, 504, False, 0)
    assert "SIGKILL" in run.stderr  # the hung stage ignored SIGTERM (its handler only records)


def test_hung_stage_then_sigint_exits_cleanly(scenario: Any, tmp_path: Path) -> None:
    marker = tmp_path / "hang"
    run = scenario(
        {
            "stages": [_hanging(marker)],
            "requests": 10,
            "request": {"prompt": [2], "max_tokens": 500},
            "config": {"startup_timeout": 240},  # default heartbeat_timeout (30 s): the hang stays undetected
        }
    )
    run.wait_event("inflight", timeout=240)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)
    t0 = time.time()
    os.kill(run.proc.pid, signal.SIGINT)
    answered = run.wait_event("answered", timeout=60)
    run.finish()
    elapsed = run.exit_time - t0
    print(f"\n[hang+SIGINT] SIGINT->supervisor exited {elapsed:.3f}s")
    assert run.proc.returncode == int(ExitCode.SIGINT), run.stderr[-3000:]
    assert elapsed < 30  # product target 5 s (stop_timeout 3 s + exit); generous here
    for r in answered["results"].values():
        assert (r["ok"], r["status"]) == (False, 503)
    assert "KeyboardInterrupt" not in run.stderr


def test_sigterm_drains_in_flight_requests_then_exits(scenario: Any) -> None:
    run = scenario(
        {
            "stages": [AR_SLOW],
            "requests": 20,
            "request": {"prompt": [2], "max_tokens": 40},
            "config": {"startup_timeout": 240, "drain_timeout": 60},
        }
    )
    run.wait_event("inflight", timeout=240)
    os.kill(run.proc.pid, signal.SIGTERM)
    answered = run.wait_event("answered", timeout=120)
    run.finish()
    assert run.proc.returncode == int(ExitCode.SIGTERM), run.stderr[-3000:]
    assert all(r["ok"] for r in answered["results"].values())
    assert run.events["stopped"]["health"] == 503
    assert run.events["stopped"]["shm_left"] == [], run.stderr[-3000:]


def test_second_signal_kills_every_stage_at_once(scenario: Any, tmp_path: Path) -> None:
    """SIGTERM starts a 60 s drain that a hung stage would use up; the second signal, through the
    same entry point (`Supervisor.handle_signal`), answers everything 503 and kills at once."""
    marker = tmp_path / "hang"
    run = scenario(
        {
            "stages": [_hanging(marker)],
            "requests": 10,
            "request": {"prompt": [2], "max_tokens": 500},
            "config": {"startup_timeout": 240, "drain_timeout": 60},
        }
    )
    run.wait_event("inflight", timeout=240)
    deadline = time.monotonic() + 60
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(run.proc.pid, signal.SIGTERM)
    time.sleep(0.5)
    t0 = time.time()
    os.kill(run.proc.pid, signal.SIGINT)
    answered = run.wait_event("answered", timeout=60)
    run.finish()
    elapsed = run.exit_time - t0
    print(f"\n[SIGTERM then SIGINT] second signal -> supervisor exited {elapsed:.3f}s")
    assert run.proc.returncode == int(ExitCode.SIGTERM), run.stderr[-3000:]  # the first signal's code
    assert elapsed < 30  # the drain (60 s) was cut short; the product target is measured, not asserted
    for r in answered["results"].values():
        assert (r["ok"], r["status"]) == (False, 503)
    assert "second signal (SIGINT): killing every stage now" in run.stderr
