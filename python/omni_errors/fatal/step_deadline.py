"""A deadline on each step of an engine loop: a step that runs past it is a hung stage.

A forward that never returns (a stuck kernel, a collective waiting for a peer that is gone) never
gives the loop back, so nothing on the loop can notice, and every request in the stage waits
forever. A daemon thread watches when the step in progress started; once a step has run past the
deadline it calls `on_hung` once, from that thread. The thread only reads a timestamp the loop
writes, so a step costs two clock reads and no lock.

The deadline is `omni_errors.settings.STEP_DEADLINE` (`OMNI_ERRORS_STEP_DEADLINE_S`; 0 turns the
watch off). Its default leaves room for what a healthy step can legitimately take: a long prefill,
or torch compiling a shape it has not seen before, which takes tens of seconds on a large model.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from omni_errors.settings import STEP_DEADLINE

__all__ = ["StepDeadline", "step_deadline_s"]


def step_deadline_s() -> float:
    """The step deadline this process is configured with; 0 when the watch is off."""
    return STEP_DEADLINE.read()


class StepDeadline:
    """Calls `on_hung(ran_s)` once, from its own thread, when a step has run longer than `deadline_s`.

    `step()` brackets one step; the watching thread starts with the first step, so an engine that
    never steps costs nothing. A `deadline_s` of 0 watches nothing.
    """

    def __init__(self, name: str, deadline_s: float, on_hung: Callable[[float], None]) -> None:
        self.name = name
        self.deadline_s = deadline_s
        self._on_hung = on_hung
        self._started: float | None = None  # when the step in progress started (monotonic), else None
        self._thread: threading.Thread | None = None
        self._stopped = threading.Event()

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        if self.deadline_s <= 0:
            yield
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name=f"{self.name}-step-deadline", daemon=True)
            self._thread.start()
        self._started = time.monotonic()
        try:
            yield
        finally:
            self._started = None

    def stop(self) -> None:
        """End the watch (the loop is ending); a step that overruns from now on is not reported."""
        self._stopped.set()

    def _watch(self) -> None:
        interval = min(1.0, self.deadline_s / 10)  # reported at most a tenth of the deadline late
        while not self._stopped.wait(interval):
            started = self._started
            if started is None:
                continue
            ran = time.monotonic() - started
            if ran > self.deadline_s:
                self._stopped.set()
                self._on_hung(ran)
