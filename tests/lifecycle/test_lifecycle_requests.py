"""Per-request failures stay per-request; startup failures stop everything with the root cause."""

from __future__ import annotations

from typing import Any

from omni_errors.fatal.exitcodes import ExitCode


def test_request_failure_leaves_other_requests_and_stage_unharmed(scenario: Any) -> None:
    run = scenario(
        {
            "stages": [
                {"kind": "ar", "kwargs": {"step_delay": 0.005}},
                {"kind": "diffusion", "kwargs": {"num_steps": 3}},
            ],
            "requests": 30,
            "request": {"prompt": [5, 6], "max_tokens": 12},
            # r3: the engine fails it; r17: add_request rejects it; r5: misses its own deadline (504)
            "special": {
                "3": {"prompt": [1], "fault": {"kind": "value_error", "stage": 0, "after": 0}},
                "17": {"prompt": [99]},
                "5": {"max_tokens": 10**6},
            },
            "timeouts": {"5": 1.0},
            "second_wave": 10,
            "config": {"startup_timeout": 240},
        }
    )
    answered = run.wait_event("answered", timeout=240)
    run.finish()
    assert run.proc.returncode == 0, run.stderr[-3000:]
    results = answered["results"]
    assert len(results) == 40
    failed = {rid: r for rid, r in results.items() if not r["ok"]}
    assert set(failed) == {"r3", "r5", "r17"}
    for rid, r in failed.items():
        assert (r["fatal"], r["stage_id"], r["request_id"]) == (False, 0, rid)
    assert (failed["r5"]["status"], failed["r5"]["category"], failed["r5"]["error_type"]) == (
        504,
        "server",
        "GatewayTimeoutError",
    )
    # raw ValueErrors raised in a stage are the server's failures (one rule for a stage-side failure:
    # no raw fallback; only an explicit client-error type is a 4xx)
    for rid in ("r3", "r17"):
        assert (failed[rid]["status"], failed[rid]["category"], failed[rid]["error_type"]) == (
            500,
            "server",
            "InternalServerError",
        )
    # every other request went through both stages: 11 streamed tokens + final list + stage 1 result
    assert all(r["outputs"] == 13 for rid, r in results.items() if rid not in failed)
    assert answered["dead"] is False


def test_startup_failure_stops_the_others_and_raises_the_root_cause(scenario: Any) -> None:
    run = scenario(
        {
            "stages": [{"kind": "ar"}, {"kind": "diffusion", "kwargs": {"fault": "startup"}}],
            "config": {"startup_timeout": 240},
        }
    )
    event = run.wait_event("startup_failed", timeout=240)
    run.finish()
    assert run.proc.returncode == int(ExitCode.STARTUP_FAILURE) == event["exit_code"]
    assert event["stage_id"] == 1
    assert "model weights not found" in event["message"]  # the child's root cause, sanitized
    assert "Traceback" in run.stderr and "toy.py" in run.stderr  # complete in the logs
    assert len(event["pids"]) == 2  # both were started; the fixture checks both are gone
