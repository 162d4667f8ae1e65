"""A multi-node head's rejoin windows: a stage that lost its last remote replica waits for one.

vLLM-Omni lets a replica re-register and restore service, so on a multi-node head (whose stages
decide when it ends: `omni_errors.fatal.process.defer_to_stages`) a stage left without a live
replica opens a window (`settings.REJOIN_WINDOW`, 120 s). While it is open a
new request for the stage is refused at once with 503 (`unavailable_answer`) and a `Retry-After`
(`retry_after`: the short hint, never past the window's end; `rebuilt` gives a record's exception
with it); a replica that registers closes it; when it passes, the pipeline ends with the outage's
exit code (`Rejoin.wait_for_replica` calls the orchestrator's end of the pipeline then). A new
request is refused at once while the head cannot serve it (`refuse_new_request`: also after a fatal
failure).

The windows are process-wide: the orchestrator's thread opens and closes them, the API's loop reads
them. vLLM-Omni's own code opens, closes and reads them (the upstream series); the vLLM-Omni plugin
does the same where vLLM-Omni does not yet.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from omni_errors._native import OmniErrorDetails
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.semantics.ids import with_request_id
from omni_errors.server.answer_headers import retry_later
from omni_errors.settings import REJOIN_WINDOW

__all__ = [
    "Ending",
    "Outage",
    "Rejoin",
    "rebuilt",
    "refuse_new_request",
    "rejoin",
    "retry_after",
    "unavailable_answer",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outage:
    """A stage without a live replica: what ended its last one, the code that implies, and when the window ends."""

    stage_id: int
    details: OmniErrorDetails
    code: ExitCode
    deadline: float  # time.monotonic()

    def seconds_left(self) -> int:
        """Whole seconds left in the window (at least 1)."""
        return max(1, math.ceil(self.deadline - time.monotonic()))

    def retry_after(self) -> int:
        """When a retry may succeed: the short hint (`omni_errors.render.http.RETRY_AFTER_S`),
        never past the window's end; a client that honours the window itself would retry only as the
        head gives up."""
        return min(RETRY_AFTER_S, self.seconds_left())


#: The orchestrator's end of the pipeline (`omni_errors.fatal.process.end_pipeline` and its answers).
Ending = Callable[[OmniErrorDetails, ExitCode], Awaitable[None]]


class Rejoin:
    """The rejoin windows of this process's stages."""

    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        self._lock = threading.Lock()
        self._outages: dict[int, Outage] = {}
        self._checks: set[asyncio.Task[None]] = set()  # the window checks, kept alive until they run

    def open(self, stage_id: int, details: OmniErrorDetails, code: ExitCode) -> Outage:
        """Stage `stage_id` lost its last replica: its window starts now (an open one is kept)."""
        with self._lock:
            outage = self._outages.get(stage_id)
            if outage is None:
                outage = Outage(stage_id, details, code, time.monotonic() + self.window_s)
                self._outages[stage_id] = outage
                opened = True
            else:
                opened = False
        if opened:
            _log.error(
                "omni-errors: stage-%d has no live replica; new requests get 503 for %.0f s while one may "
                "register, then the head ends (exit %d)",
                stage_id,
                self.window_s,
                int(code),
            )
        return outage

    def wait_for_replica(self, stage_id: int, details: OmniErrorDetails, code: ExitCode, end: Ending) -> Outage:
        """`open` the window of `stage_id` and, on the running loop, `await end(details, code)` of its
        outage once the window has passed without a replica (the pipeline ends there)."""
        outage = self.open(stage_id, details, code)
        loop = asyncio.get_running_loop()
        delay = max(0.0, outage.deadline - time.monotonic()) + 0.05  # just past the deadline: `expired` says so
        loop.call_later(delay, self._check_soon, stage_id, end)
        return outage

    def _check_soon(self, stage_id: int, end: Ending) -> None:
        task = asyncio.get_running_loop().create_task(self._end_if_expired(stage_id, end))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def _end_if_expired(self, stage_id: int, end: Ending) -> None:
        outage = self.expired(stage_id)
        if outage is None:  # a replica registered in time
            return
        _log.critical(
            "omni-errors: no replica of stage-%d registered within %.0f s; ending the pipeline", stage_id, self.window_s
        )
        await end(outage.details, outage.code)

    def close(self, stage_id: int) -> Outage | None:
        """A replica of `stage_id` registered: its outage (if any) is over."""
        with self._lock:
            outage = self._outages.pop(stage_id, None)
        if outage is not None:
            _log.warning("omni-errors: stage-%d has a live replica again; serving", stage_id)
        return outage

    def outage(self, stage_id: int | None = None) -> Outage | None:
        """The open outage of `stage_id`, or (None) the one whose window ends first."""
        with self._lock:
            if stage_id is not None:
                return self._outages.get(stage_id)
            return min(self._outages.values(), key=lambda o: o.deadline, default=None)

    def expired(self, stage_id: int) -> Outage | None:
        """The outage of `stage_id` if its window has passed."""
        outage = self.outage(stage_id)
        return outage if outage is not None and time.monotonic() >= outage.deadline else None


_state_lock = threading.Lock()
_rejoin: Rejoin | None = None


def rejoin() -> Rejoin:
    """The process's windows (the window length is read from the environment once)."""
    global _rejoin
    with _state_lock:
        if _rejoin is None:
            _rejoin = Rejoin(REJOIN_WINDOW.read())
        return _rejoin


def unavailable_answer(stage_id: int, request_id: str | None) -> OmniErrorDetails:
    """The record of a request refused because its stage has no replica: 503, retried later."""
    from omni_errors.semantics.core_table import unavailable_record

    outage = rejoin().outage(stage_id)
    window = f" (one may register within {outage.seconds_left()} s, then the server ends)" if outage else ""
    return unavailable_record(
        f"Stage {stage_id} has no live replica; retry later{window}", stage_id=stage_id, request_id=request_id
    )


def refuse_new_request() -> None:
    """Raise at once for a new request the server cannot serve: after a fatal failure, the fatal
    record (the pipeline is ending: a request submitted now would wait for an answer that never
    comes); on a multi-node head while a stage waits for a replica, 503 with `Retry-After`."""
    from omni_errors.semantics.exceptions import rebuild

    record = fatal.declared()
    if record is not None:
        raise rebuild(record)
    outage = rejoin().outage() if fatal.stages_decide() else None
    if outage is not None:
        raise rebuilt(unavailable_answer(outage.stage_id, None))  # its `Retry-After` from the same window


def rebuilt(details: OmniErrorDetails) -> Exception:
    """`details` as the exception to raise for a request (`omni_errors.semantics.exceptions.rebuild`);
    a 503 on a multi-node head waiting for a replica says when to retry (`retry_after`). Once the
    pipeline has ended, a server's error is its fatal record: the stopping orchestrator fails the
    requests it had not taken yet with a generic error of its own, and they ended with the pipeline."""
    from omni_errors.semantics.exceptions import OmniServerError, rebuild

    ended = fatal.declared()
    if ended is not None and details.category == "server" and not details.fatal:
        details = with_request_id(ended, details.request_id)
    failure = rebuild(details)
    if isinstance(failure, OmniServerError):
        retry_later(failure, retry_after(details))
    return failure


def retry_after(details: OmniErrorDetails) -> int | None:
    """`Retry-After` for a 503 answered on a multi-node head: the seconds left in its stage's window."""
    if not fatal.stages_decide() or details.status_code != 503:
        return None
    outage = rejoin().outage(details.stage_id) if details.stage_id is not None else rejoin().outage()
    return outage.retry_after() if outage is not None else min(RETRY_AFTER_S, math.ceil(rejoin().window_s))
