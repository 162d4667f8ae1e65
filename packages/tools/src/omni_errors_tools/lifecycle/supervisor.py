"""The API-side supervisor: starts the stages, routes requests, and fails fast.

Each stage is a `links.StageLink`, local (a child process) or remote (another host, over the ZMQ
link); the supervisor treats both alike. Everything runs on the asyncio loop: the links call the
`LinkListener` methods below the moment something happens, and a watchdog task checks request
deadlines, heartbeats and link deadlines. On any fatal event `_die` answers every in-flight
request with the canonical error (stage id kept), stops every stage through the one kill path
(`stopping.StopPlan`), releases the shared memory and sockets and marks the supervisor dead; the
API process then exits with `exit_code` through normal interpreter shutdown. Around it: the
states and their moves (`state.py`), the request table (`requests.py`), the links and what they
share (`stageset.py`), the periodic checks (`watchdog.py`), the kill path (`stopping.py`) and the
records for refused requests (`refusals.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from omni_errors import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode, exit_code_for_signal
from omni_errors.fatal.policy import FatalState
from omni_errors.semantics.core_table import fatal_record, unavailable_record
from omni_errors.semantics.ids import with_request_id
from omni_errors_tools.lifecycle.engine import RemoteStageSpec, StageSpec
from omni_errors_tools.lifecycle.links import LinkPayloadError, LinkRefusedError, Output, StageLink
from omni_errors_tools.lifecycle.refusals import overloaded, shutting_down, unpassable
from omni_errors_tools.lifecycle.requests import Requests
from omni_errors_tools.lifecycle.signals import AsyncSignalHandlers
from omni_errors_tools.lifecycle.stageset import StageSet
from omni_errors_tools.lifecycle.state import State, transition
from omni_errors_tools.lifecycle.stopping import StopPlan
from omni_errors_tools.lifecycle.supervisor_types import (
    DuplicateRequestError,
    Health,
    LifecycleConfig,
    StageResult,
    StageStartupError,
    default_error_factory,
)
from omni_errors_tools.lifecycle.watchdog import Watchdog

if TYPE_CHECKING:
    from omni_errors_tools.lifecycle.remote.config import LinkConfig
    from omni_errors_tools.lifecycle.remote.supervisor_side import LinkStats

__all__ = ["Supervisor"]

logger = logging.getLogger(__name__)


class Supervisor:
    """Runs a linear pipeline of stages: a request enters stage 0; each stage's finished output is
    the next stage's input; the client stream ends when the last stage finishes."""

    def __init__(
        self,
        stages: Sequence[StageSpec | RemoteStageSpec],
        config: LifecycleConfig | None = None,
        *,
        link: LinkConfig | None = None,
        error_factory: Callable[[OmniErrorDetails], BaseException] = default_error_factory,
    ) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")  # omni-errors: ignore[OE101]: a caller's defect
        self.config = config or LifecycleConfig()
        self._stages = StageSet(stages, self.config, link)
        self._links = self._stages.links
        self._error_factory = error_factory
        self._emit: list[bool] = [spec.emit for spec in stages]
        self._ready: list[asyncio.Future[None]] = []
        self._requests = Requests()
        self._state = State.NEW
        self._dead_reason: str | None = None
        # A stop's code (a clean stop, a signal); a fatal failure's record and code are the fatal
        # state's, read from it: the one fatal policy, never mirrored here.
        self._stop_code = ExitCode.OK
        self._fatal = FatalState()
        self._stopped = asyncio.Event()
        self._stop: StopPlan | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signals: AsyncSignalHandlers | None = None
        self._signals_seen = 0
        self._signal_task: asyncio.Future[None] | None = None
        self._dead_callbacks: list[Callable[[], None]] = []

    # -- public API ------------------------------------------------------------------------

    @property
    def dead_error(self) -> OmniErrorDetails | None:
        return self._fatal.record

    @property
    def exit_code(self) -> ExitCode:
        """What the API process should exit with: 0 after a clean stop, else from `ExitCode` (a
        fatal failure's code wins over a stop's)."""
        fatal = self._fatal.exit_code
        return self._stop_code if fatal is None else fatal

    @property
    def pids(self) -> list[int]:
        """Process ids of the local stages (remote stages run elsewhere)."""
        return [pid for link in self._links if (pid := link.pid) is not None]

    @property
    def shm_names(self) -> list[str]:
        return self._stages.shm_names

    def link_stats(self) -> LinkStats | None:
        """What the remote link received and refused (None without remote stages)."""
        return self._stages.link_stats

    def counters(self) -> dict[str, int]:
        """`answered`: terminal answers given (each request gets exactly one); `late`: reports that
        arrived for requests already answered or elsewhere, and were dropped."""
        return {"in_flight": len(self._requests), "answered": self._requests.answered, "late": self._requests.late}

    def health(self) -> Health:
        ok = self._state is State.RUNNING
        return Health(ok, 200 if ok else 503, self._state, self._fatal.record)

    def add_dead_callback(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on the loop) once the supervisor has stopped, e.g. to end uvicorn."""
        self._dead_callbacks.append(callback)

    async def wait_dead(self) -> OmniErrorDetails | None:
        """Wait until every stage is gone and the shm is removed; returns `dead_error`."""
        assert self._state is not State.NEW, "start() first"
        await self._stopped.wait()  # omni-errors: ignore[OE303]: the stop plan's SIGKILL bounds it
        return self._fatal.record

    async def start(self) -> None:
        """Start every stage, then wait (with `startup_timeout`) for all READY frames.

        Raises StageStartupError with the stage's root cause; the other stages are stopped first.
        """
        self._loop = asyncio.get_running_loop()
        self._move(State.STARTING)
        try:
            for _ in self._stages.specs:
                self._ready.append(self._loop.create_future())
            await self._stages.open(self, self)
        except BaseException:
            reason = "the pipeline could not start its stages"
            self._die(fatal_record(stage_id=None), ExitCode.STARTUP_FAILURE, reason)
            await self.wait_dead()
            raise
        self._watchdog = asyncio.create_task(self._watch(), name="omni-lifecycle-watchdog")
        all_ready: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*self._ready))
        stopping = self._stopped.wait()  # omni-errors: ignore[OE303]: awaited under startup_timeout below
        stopped: asyncio.Future[Any] = asyncio.ensure_future(stopping)
        done, _ = await asyncio.wait(
            {all_ready, stopped}, timeout=self.config.startup_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        stopped.cancel()
        if all_ready in done and not all_ready.exception() and self._move(State.RUNNING):
            return
        late = [i for i, ready in enumerate(self._ready) if not ready.done()]
        all_ready.cancel()
        with contextlib.suppress(BaseException):
            await all_ready
        if self._state.live and late:
            reason = f"stage {late[0]} did not start within {self.config.startup_timeout:g}s"
            self._die(fatal_record(stage_id=late[0]), ExitCode.STARTUP_FAILURE, reason)
        await self.wait_dead()
        raise StageStartupError(
            self._fatal.record or unavailable_record("Startup was interrupted", stage_id=None),
            self._dead_reason or "startup was interrupted",
        )

    def submit(self, payload: Any, *, request_id: str | None = None, timeout: float | None = None) -> str:
        """Send a request into stage 0; read it with `stream(request_id)`.

        Raises `error_factory(details)` when not serving (503, or the death's record) and when
        stage 0's queue is at its high-water mark (503)."""
        if not self._state.serving or self._loop is None:
            details = self._fatal.record or unavailable_record("The pipeline is not serving", stage_id=None)
            raise self._error_factory(with_request_id(details, request_id))
        request_id = request_id or uuid.uuid4().hex
        if request_id in self._requests:
            raise DuplicateRequestError(request_id)
        if len(self._requests) >= self.config.max_inflight:
            raise self._error_factory(overloaded(None, request_id))
        timeout = timeout if timeout is not None else self.config.request_timeout
        try:
            self._links[0].add(request_id, payload)
        except LinkRefusedError as exc:
            logger.warning("refusing request %s: %s", request_id, exc)
            raise self._error_factory(overloaded(0, request_id, exc)) from None
        except LinkPayloadError as exc:
            logger.error("refusing request %s: %s", request_id, exc)
            raise self._error_factory(unpassable(0, request_id)) from None
        self._requests.open(request_id, self._loop.time() + timeout if timeout is not None else None)
        return request_id

    def stream(self, request_id: str) -> AsyncIterator[StageResult]:
        """Yield the request's results; raise `error_factory(details)` if it failed."""
        return self._requests.stream(request_id, self._error_factory)

    async def generate(
        self, payload: Any, *, request_id: str | None = None, timeout: float | None = None
    ) -> list[StageResult]:
        rid = self.submit(payload, request_id=request_id, timeout=timeout)
        return [r async for r in self.stream(rid)]

    def abort(self, request_id: str) -> None:
        stage = self._requests.abort(request_id)
        if stage is not None:
            self._links[stage].abort(request_id)

    async def shutdown(self, *, drain_timeout: float = 0.0, exit_code: ExitCode = ExitCode.OK) -> None:
        """Stop serving: let in-flight requests finish for `drain_timeout`, answer the rest 503,
        ask each stage to stop, then terminate/kill stragglers and release shm and sockets."""
        if self._state is State.NEW:
            return
        draining = self._state is State.RUNNING and drain_timeout > 0 and self._move(State.DRAINING)
        if draining:  # this call owns the drain; others made meanwhile only wait for the end
            self._stop_code = exit_code
            await self._drain(drain_timeout)
        if self._state in (State.STARTING, State.RUNNING) or (draining and self._state is State.DRAINING):
            self._stop_code = exit_code
            self._move(State.STOPPING)
            self._requests.fail_all(shutting_down())
            for link in self._links:
                link.shutdown()
            self._start_stop()
        await self.wait_dead()

    async def _drain(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(self._requests) and time.monotonic() < deadline and self._state is State.DRAINING:
            await asyncio.sleep(0.02)

    def handle_signal(self, signum: int) -> None:
        """The one entry point for SIGINT/SIGTERM, whoever caught them (our handlers, uvicorn's).

        First signal: SIGTERM drains (`drain_timeout`) then stops, exit 143; SIGINT stops now, exit
        130. Any later signal: every in-flight request is answered 503 and every stage killed now.
        """
        self._signals_seen += 1
        name = signal.Signals(signum).name
        if self._signals_seen == 1:
            drain = self.config.drain_timeout if signum == signal.SIGTERM else 0.0
            logger.warning("received %s; stopping the pipeline (drain %.0fs)", name, drain)
            self._signal_task = asyncio.ensure_future(
                self.shutdown(drain_timeout=drain, exit_code=exit_code_for_signal(signum))
            )
            return
        logger.warning("second signal (%s): killing every stage now", name)
        self._stop_code = self._stop_code or exit_code_for_signal(signum)
        if self._state.live:
            self._move(State.STOPPING)
        self._requests.fail_all(shutting_down())
        if self._state is not State.NEW:
            self._start_stop()
            assert self._stop is not None
            self._stop.force()

    def install_signal_handlers(self) -> None:
        """Route SIGINT/SIGTERM on the running loop to `handle_signal` (main thread only); they
        stay until `remove_signal_handlers()` or the supervisor has stopped."""
        if self._signals is None:
            self._signals = AsyncSignalHandlers(asyncio.get_running_loop(), self.handle_signal)
            self._signals.install()

    def remove_signal_handlers(self) -> None:
        if self._signals is not None:
            self._signals.remove()
            self._signals = None

    # -- what the links report (LinkListener) ---------------------------------------------

    def on_ready(self, link: StageLink) -> None:
        ready = self._ready[link.stage_id]
        if not ready.done():
            ready.set_result(None)

    def on_startup_failed(self, link: StageLink, details: OmniErrorDetails, traceback: str) -> None:
        logger.error("stage %d (%s) failed to start; its traceback:\n%s", link.stage_id, link.where, traceback)
        self._die(details, ExitCode.STARTUP_FAILURE)

    def on_outputs(self, link: StageLink, outputs: Sequence[Output]) -> None:
        stage = link.stage_id
        last = stage == len(self._links) - 1
        for request_id, payload in self._requests.route(stage, outputs, emit=self._emit[stage], last=last):
            try:
                self._links[stage + 1].add(request_id, payload)
            except LinkRefusedError as exc:
                logger.warning("request %s cannot enter stage %d: %s", request_id, stage + 1, exc)
                self._requests.fail(request_id, overloaded(stage + 1, request_id, exc))
            except LinkPayloadError as exc:
                logger.error("request %s cannot enter stage %d: %s", request_id, stage + 1, exc)
                self._requests.fail(request_id, unpassable(stage + 1, request_id))

    def on_request_error(self, link: StageLink, details: OmniErrorDetails) -> None:
        self._requests.fail(details.request_id or "", details, at_stage=link.stage_id)

    def on_fatal(self, link: StageLink, details: OmniErrorDetails, code: ExitCode) -> None:
        logger.critical("stage %d (%s) reported a fatal %s", link.stage_id, link.where, details.error_type)
        self._die(details, code)

    def on_lost(self, link: StageLink, details: OmniErrorDetails | None, code: ExitCode, reason: str) -> None:
        if not self._state.live:
            return  # stopping anyway: a stage leaving is expected
        logger.critical("stage %d (%s): %s", link.stage_id, link.where, reason)
        record = details or fatal_record(stage_id=link.stage_id)
        self._die(record, code, None if details else reason)

    # -- the watchdog ----------------------------------------------------------------------

    async def _watch(self) -> None:
        assert self._loop is not None
        watchdog = Watchdog(self.config, self._links, self._requests, self._die)
        while self._state.live:
            await asyncio.sleep(self.config.watchdog_interval)
            watchdog.tick(self._loop.time(), serving=self._state in (State.RUNNING, State.DRAINING))

    # -- failing and stopping --------------------------------------------------------------

    def _move(self, target: State) -> bool:
        if not transition(self._state, target):
            return False
        logger.debug("supervisor: %s -> %s", self._state.value, target.value)
        self._state = target
        return True

    def _die(self, details: OmniErrorDetails, code: ExitCode, reason: str | None = None) -> None:
        """Answer everything now (synchronously, inside the callback that saw the failure), then stop.

        `reason` is for the logs and StageStartupError; clients get the canonical record."""
        starting = self._state is State.STARTING
        if not self._move(State.DEAD):
            if self._fatal.record is not None:  # a cause reported after the death may still win
                self._fatal.note(code)
            return
        self._dead_reason = reason or details.message
        self._fatal.declare(details, code, starting=starting)  # the one fatal policy
        details, code = self._fatal.record or details, self._fatal.exit_code or code
        answered = self._requests.fail_all(details)
        logger.critical(
            "pipeline dead: stage %s: %s (exit code %d); answered %d requests, stopping stages",
            details.stage_id,
            self._dead_reason,
            code,
            answered,
        )
        for ready in self._ready:
            if not ready.done():
                ready.set_exception(StageStartupError(details))
                ready.exception()  # retrieved: the failure is raised from start() instead
        self._start_stop()

    def _start_stop(self) -> None:
        if self._stop_task is None:
            self._stop = StopPlan(self._links, self.config.stop_timeout)
            self._stop_task = asyncio.ensure_future(self._run_stop(self._stop))

    async def _run_stop(self, plan: StopPlan) -> None:
        try:
            await plan.run()
        finally:
            self._release()

    def _release(self) -> None:
        self._stages.release()
        if self._watchdog is not None:
            self._watchdog.cancel()
        self.remove_signal_handlers()
        self._move(State.STOPPED)
        self._stopped.set()
        for callback in self._dead_callbacks:
            try:
                callback()
            except Exception:  # omni-errors: ignore[OE202]: logged; the other callbacks still run
                logger.exception("dead callback failed")
