"""The kill path, written once: terminate every stage, wait, kill what is left, wait.

`StopPlan` holds the schedule and no way of waiting, so one plan serves every caller: the
supervisor runs it on its loop (`run`), a second signal calls `force()` to skip to the kill step,
and the interpreter-exit finalizer runs it blocking (`run_blocking`) when no loop is left. Each
stage is a `StageLink`: terminate is SIGTERM for a child process and SHUTDOWN for a remote stage;
kill is SIGKILL or abandoning the session (the remote stage's own deadline then ends it).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from typing import Protocol

from omni_errors_tools.lifecycle.links import StageLink

__all__ = ["StopPlan", "emergency_stop"]

logger = logging.getLogger(__name__)

_POLL = 0.01  # how often the plan looks at the stages while it waits


class StopPlan:
    """Terminate now; kill at `grace` (at once after `force()`); stop waiting `grace` after the kill."""

    def __init__(self, links: Sequence[StageLink], grace: float) -> None:
        self._links = links
        self._grace = grace
        self._start: float | None = None
        self._killed_at: float | None = None
        self._forced = False

    def force(self) -> None:
        """Kill now (a second signal): the next step kills instead of waiting out the grace."""
        self._forced = True

    def step(self, now: float) -> bool:
        """Do what is due at `now`; False once every stage is gone or the last deadline passed."""
        if self._start is None:
            self._start = now
            for link in self._links:
                if link.alive:
                    link.terminate()
        alive = [link for link in self._links if link.alive]
        if not alive:
            return False
        if self._killed_at is None and (self._forced or now - self._start >= self._grace):
            self._killed_at = now
            for link in alive:
                if not self._forced:
                    logger.error("stage %d still running %.1fs after the stop request", link.stage_id, self._grace)
                link.kill()
        if self._killed_at is not None and now - self._killed_at >= self._grace:
            logger.error("stages %s still running %.1fs after the kill", [link.stage_id for link in alive], self._grace)
            return False
        return True

    async def run(self) -> None:
        while self.step(time.monotonic()):
            await asyncio.sleep(_POLL)

    def run_blocking(self) -> None:
        while self.step(time.monotonic()):
            time.sleep(_POLL)


class _Closable(Protocol):
    def close(self) -> None: ...


class _Unlinkable(Protocol):
    def unlink(self) -> None: ...


def emergency_stop(
    links: Sequence[StageLink], board: _Unlinkable | None, server: _Closable | None, grace: float
) -> None:
    """Interpreter exit without `Supervisor.shutdown()` (a multiprocessing finalizer): the same
    plan, blocking, before multiprocessing joins its children (it would wait forever for a hung
    stage); then the links, the link server and the shm segment are released."""
    with contextlib.suppress(Exception):
        StopPlan(links, grace).run_blocking()
    for link in links:
        with contextlib.suppress(Exception):
            link.close()
    if server is not None:
        with contextlib.suppress(Exception):
            server.close()
    if board is not None:
        board.unlink()
