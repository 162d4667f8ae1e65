"""`omni_errors.fatal.step_deadline`: a step that runs past its deadline is reported once, from the
deadline's own thread; steps that end in time, and a deadline of 0, report nothing.

The bounds below only keep a broken watch from hanging the suite: nothing here asserts a duration."""

from __future__ import annotations

import threading
import time

import pytest
from omni_errors.fatal import step_deadline
from omni_errors.fatal.step_deadline import StepDeadline
from omni_errors.settings import STEP_DEADLINE

BOUND_S = 30.0


def test_a_step_past_its_deadline_is_reported_once_from_the_watching_thread() -> None:
    reports: list[tuple[float, str]] = []
    reported = threading.Event()

    def on_hung(ran_s: float) -> None:
        reports.append((ran_s, threading.current_thread().name))
        reported.set()

    watch = StepDeadline("engine-core", 0.05, on_hung)
    with watch.step():  # a forward that does not return
        assert reported.wait(BOUND_S)
        time.sleep(0.3)  # several more checks while the step still runs: no second report
    with watch.step():
        time.sleep(0.2)  # the watch has ended: an overrun now is not reported again
    assert len(reports) == 1
    ran_s, thread = reports[0]
    assert ran_s > 0.05
    assert thread == "engine-core-step-deadline"


def test_steps_that_end_in_time_report_nothing() -> None:
    reports: list[float] = []
    watch = StepDeadline("engine-core", 0.5, reports.append)
    for _ in range(20):
        with watch.step():
            pass
        time.sleep(0.05)  # idle between steps for longer than a step: idle is not a hang
    watch.stop()
    assert reports == []


def test_a_deadline_of_zero_watches_nothing() -> None:
    before = threading.active_count()
    watch = StepDeadline("engine-core", 0, lambda ran_s: pytest.fail("reported"))
    with watch.step():
        pass
    assert threading.active_count() == before  # no thread was started


def test_an_exception_in_a_step_ends_the_step() -> None:
    reports: list[float] = []
    watch = StepDeadline("engine-core", 0.05, reports.append)
    with pytest.raises(RuntimeError), watch.step():
        raise RuntimeError("the forward failed")
    time.sleep(0.3)  # several checks: no step is in progress
    watch.stop()
    assert reports == []


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, STEP_DEADLINE.default),
        ("2.5", 2.5),
        ("0", 0.0),
        ("-1", STEP_DEADLINE.default),
        ("soon", STEP_DEADLINE.default),
    ],
)
def test_the_deadline_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str | None, expected: float
) -> None:
    if raw is None:
        monkeypatch.delenv(STEP_DEADLINE.name, raising=False)
    else:
        monkeypatch.setenv(STEP_DEADLINE.name, raw)
    assert step_deadline.step_deadline_s() == expected
    refused = raw in ("-1", "soon")
    assert (STEP_DEADLINE.name in caplog.text) is refused  # a value it cannot use is said, never silently dropped
