"""The API-side supervisor: starts the stage processes, routes requests, and fails fast.

Everything is driven by the asyncio loop: each stage's result pipe and its process sentinel are
loop readers, so a fatal frame, an unexpected exit and a broken channel are all seen the moment
they happen, without threads or polling. A watchdog task checks heartbeats and request deadlines.
On any fatal event `_die` answers every in-flight request with the canonical error (stage id
kept), stops every stage (SIGTERM, deadline, SIGKILL), unlinks the shared memory and marks the
supervisor dead; the API process then exits with `exit_code` through normal interpreter shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.process import BaseProcess
from multiprocessing.util import Finalize
from typing import Any

import omni_errors
from omni_errors import OmniErrorDetails
from omni_errors.core_table import fatal_record
from omni_errors.lifecycle.api import (
    DuplicateRequestError,
    Health,
    LifecycleConfig,
    StageResult,
    StageStartupError,
    default_error_factory,
)
from omni_errors.lifecycle.channels import FrameReader, Kind, StatusBoard, pack, unpack_failed
from omni_errors.lifecycle.engine import StageSpec
from omni_errors.lifecycle.exitcodes import ExitCode, exit_code_for_signal
from omni_errors.lifecycle.failures import lifecycle_error
from omni_errors.lifecycle.signals import AsyncSignalHandlers
from omni_errors.lifecycle.worker import run_stage

__all__ = ["Supervisor"]

logger = logging.getLogger("omni_errors.lifecycle.supervisor")


_END = object()


@dataclass
class _Request:
    request_id: str
    queue: asyncio.Queue[Any]
    stage: int = 0
    deadline: float | None = None  # loop.time()


@dataclass
class _Stage:
    stage_id: int
    spec: StageSpec
    proc: BaseProcess
    ready: asyncio.Future[None]
    writer: asyncio.WriteTransport | None = None
    reader: asyncio.ReadTransport | None = None
    exited: bool = False
    hung_since: float | None = None
    pending_requests: set[str] = field(default_factory=set)


class _WriterProtocol(asyncio.Protocol):
    def __init__(self, on_lost: Callable[[BaseException | None], None]) -> None:
        self._on_lost = on_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(exc)


class Supervisor:
    """Runs a linear pipeline of stages: a request enters stage 0; each stage's finished output is
    the next stage's input; the client stream ends when the last stage finishes."""

    def __init__(
        self,
        stages: Sequence[StageSpec],
        config: LifecycleConfig | None = None,
        *,
        error_factory: Callable[[OmniErrorDetails], BaseException] = default_error_factory,
    ) -> None:
        if not stages:
            raise ValueError("a pipeline needs at least one stage")
        self.config = config or LifecycleConfig()
        self._specs = list(stages)
        self._error_factory = error_factory
        self._ctx = multiprocessing.get_context("spawn")
        self._stages: list[_Stage] = []
        self._requests: dict[str, _Request] = {}
        self._streams: dict[str, asyncio.Queue[Any]] = {}
        self._board: StatusBoard | None = None
        self._state = "new"
        self._dead_error: OmniErrorDetails | None = None
        self._dead_reason: str | None = None
        self._exit_code = int(ExitCode.OK)
        self._stopped: asyncio.Event | None = None
        self._stop_task: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._signals: AsyncSignalHandlers | None = None
        self._finalizer: Finalize | None = None
        self._dead_callbacks: list[Callable[[], None]] = []
        self._signal_task: asyncio.Future[None] | None = None

    # -- public API ------------------------------------------------------------------------

    @property
    def errored(self) -> bool:
        return self._dead_error is not None

    @property
    def dead_error(self) -> OmniErrorDetails | None:
        return self._dead_error

    @property
    def exit_code(self) -> int:
        """What the API process should exit with: 0 after a clean stop, else from `ExitCode`."""
        return self._exit_code

    @property
    def pids(self) -> list[int]:
        return [s.proc.pid for s in self._stages if s.proc.pid is not None]

    @property
    def shm_names(self) -> list[str]:
        return [self._board.name] if self._board is not None else []

    def health(self) -> Health:
        ok = self._state == "running"
        return Health(ok, 200 if ok else 503, self._state, self._dead_error)

    def add_dead_callback(self, callback: Callable[[], None]) -> None:
        """Call `callback()` (on the loop) once the supervisor has stopped, e.g. to end uvicorn."""
        self._dead_callbacks.append(callback)

    async def wait_dead(self) -> OmniErrorDetails | None:
        """Wait until every stage is gone and the shm is removed; returns `dead_error`."""
        assert self._stopped is not None, "start() first"
        await self._stopped.wait()
        return self._dead_error

    async def start(self) -> None:
        """Spawn every stage, then wait (with `startup_timeout`) for all READY frames.

        Raises StageStartupError with the child's root cause; the other stages are stopped first.
        """
        self._loop = asyncio.get_running_loop()
        self._stopped = asyncio.Event()
        self._state = "starting"
        try:
            self._board = StatusBoard.create(len(self._specs), self.config.shm_prefix)
            self._finalizer = Finalize(
                self, _emergency_stop, args=(self._stages, self._board, self.config), exitpriority=100
            )
            for stage_id, spec in enumerate(self._specs):
                await self._spawn(stage_id, spec)
        except BaseException:
            reason = "the pipeline could not spawn its stages"
            await self._die(fatal_record(stage_id=None), ExitCode.STARTUP_FAILURE, reason)
            await self.wait_dead()
            raise
        self._watchdog = asyncio.create_task(self._watch(), name="omni-lifecycle-watchdog")
        all_ready: asyncio.Future[Any] = asyncio.ensure_future(asyncio.gather(*(s.ready for s in self._stages)))
        stopped: asyncio.Future[Any] = asyncio.ensure_future(self._stopped.wait())
        done, _ = await asyncio.wait(
            {all_ready, stopped}, timeout=self.config.startup_timeout, return_when=asyncio.FIRST_COMPLETED
        )
        stopped.cancel()
        if all_ready in done and not all_ready.exception() and self._dead_error is None:
            self._state = "running"
            return
        all_ready.cancel()
        with contextlib.suppress(BaseException):
            await all_ready
        if self._dead_error is None:
            late = [s.stage_id for s in self._stages if not s.ready.done()]
            reason = f"stage {late[0]} did not start within {self.config.startup_timeout:g}s"
            await self._die(fatal_record(stage_id=late[0]), ExitCode.STARTUP_FAILURE, reason)
        await self.wait_dead()
        raise StageStartupError(
            self._dead_error or lifecycle_error("unavailable", "Startup was interrupted", stage_id=None),
            self._dead_reason or "startup was interrupted",
        )

    def submit(self, payload: Any, *, request_id: str | None = None, timeout: float | None = None) -> str:
        """Send a request into stage 0; read it with `stream(request_id)`. Raises when not running."""
        if self._state != "running" or self._loop is None:
            details = self._dead_error or lifecycle_error("unavailable", "The pipeline is not serving", stage_id=None)
            raise self._error_factory(details.replace(request_id=request_id))
        request_id = request_id or uuid.uuid4().hex
        if request_id in self._requests:
            raise DuplicateRequestError(request_id)
        timeout = timeout if timeout is not None else self.config.request_timeout
        deadline = self._loop.time() + timeout if timeout is not None else None
        req = _Request(request_id, asyncio.Queue(), 0, deadline)
        self._requests[request_id] = req
        self._streams[request_id] = req.queue
        self._send_to_stage(0, request_id, pack(Kind.ADD, pickle.dumps((request_id, payload), protocol=5)))
        return request_id

    async def stream(self, request_id: str) -> AsyncIterator[StageResult]:
        """Yield the request's results; raise `error_factory(details)` if it failed."""
        queue = self._streams.pop(request_id, None)
        if queue is None:
            raise KeyError(f"unknown request id {request_id!r} (or already streamed)")
        while True:
            item = await queue.get()
            if item is _END:
                return
            if isinstance(item, OmniErrorDetails):
                raise self._error_factory(item)
            yield item

    async def generate(
        self, payload: Any, *, request_id: str | None = None, timeout: float | None = None
    ) -> list[StageResult]:
        rid = self.submit(payload, request_id=request_id, timeout=timeout)
        return [r async for r in self.stream(rid)]

    def abort(self, request_id: str) -> None:
        req = self._requests.pop(request_id, None)
        if req is not None:
            self._send_to_stage(req.stage, None, pack(Kind.ABORT, request_id.encode()))
            req.queue.put_nowait(_END)

    async def shutdown(self, *, drain_timeout: float = 0.0, exit_code: int = 0) -> None:
        """Stop serving: let in-flight requests finish for `drain_timeout`, answer the rest 503,
        ask each stage to stop, then SIGTERM/SIGKILL stragglers and remove the shm."""
        if self._state != "running":
            if self._stopped is not None and self._state != "new":
                if self._state == "starting":
                    self._exit_code = exit_code
                    self._state = "stopping"
                    self._answer_all(lifecycle_error("unavailable", "The server is shutting down", stage_id=None))
                    self._start_stop()
                await self._stopped.wait()
            return
        self._state = "draining"
        self._exit_code = exit_code
        deadline = time.monotonic() + drain_timeout
        while self._requests and time.monotonic() < deadline and self._dead_error is None:
            await asyncio.sleep(0.02)
        if self._dead_error is not None:
            await self.wait_dead()
            return
        self._state = "stopping"
        self._answer_all(lifecycle_error("unavailable", "The server is shutting down", stage_id=None))
        for stage in self._stages:
            self._write(stage, pack(Kind.SHUTDOWN))
        self._start_stop()
        await self.wait_dead()

    def install_signal_handlers(self) -> None:
        """SIGTERM: drain (drain_timeout) then stop, exit 143. SIGINT: stop now, exit 130.
        A second signal kills the stages at once."""
        assert self._loop is not None, "start() first"
        self._signals = AsyncSignalHandlers(self._loop, self._on_signal, self._on_force)
        self._signals.install()

    # -- stage processes -------------------------------------------------------------------

    async def _spawn(self, stage_id: int, spec: StageSpec) -> None:
        loop = self._loop
        assert loop is not None and self._board is not None
        to_child_r, to_child_w = self._ctx.Pipe(duplex=False)
        from_child_r, from_child_w = self._ctx.Pipe(duplex=False)
        proc = self._ctx.Process(
            target=run_stage,
            args=(stage_id, spec, to_child_r, from_child_w, self._board.name, len(self._specs), self.config.worker()),
            name=f"omni-stage-{stage_id}{'-' + spec.name if spec.name else ''}",
        )
        stage = _Stage(stage_id, spec, proc, loop.create_future())
        self._stages.append(stage)
        try:
            proc.start()
        finally:
            to_child_r.close()
            from_child_w.close()
        logger.info("stage %d (%s) started, pid %d", stage_id, spec.name or "-", proc.pid)
        rfile = os.fdopen(os.dup(from_child_r.fileno()), "rb", buffering=0)
        wfile = os.fdopen(os.dup(to_child_w.fileno()), "wb", buffering=0)
        from_child_r.close()
        to_child_w.close()
        reader = FrameReader(
            lambda kind, body: self._on_message(stage, kind, body),
            lambda exc: self._on_channel_closed(stage, exc, "result"),
        )
        stage.reader, _ = await loop.connect_read_pipe(lambda: reader, rfile)
        stage.writer, _ = await loop.connect_write_pipe(
            lambda: _WriterProtocol(lambda exc: self._on_channel_closed(stage, exc, "request")), wfile
        )
        loop.add_reader(proc.sentinel, self._on_exit, stage)

    def _on_message(self, stage: _Stage, kind: int, body: memoryview) -> None:
        if kind == Kind.OUTPUTS:
            self._route(stage, pickle.loads(body))
        elif kind == Kind.REQUEST_ERROR:
            details = omni_errors.decode(body)
            self._fail_request(details.request_id or "", details)
        elif kind == Kind.READY:
            if not stage.ready.done():
                stage.ready.set_result(None)
        elif kind == Kind.FAILED:
            details, tb = unpack_failed(body)
            logger.error("stage %d failed to start; its traceback:\n%s", stage.stage_id, tb)
            self._schedule_die(details, ExitCode.STARTUP_FAILURE)
        elif kind == Kind.FATAL:
            details = omni_errors.decode(body[1:])
            logger.critical("stage %d reported a fatal %s", stage.stage_id, details.error_type)
            self._schedule_die(details, self._code_for(body[0]))
        else:
            raise ValueError(f"unknown message kind {kind} from stage {stage.stage_id}")

    def _route(self, stage: _Stage, outputs: list[tuple[str, Any, bool]]) -> None:
        last = stage.stage_id == len(self._stages) - 1
        for request_id, payload, finished in outputs:
            req = self._requests.get(request_id)
            if req is None or req.stage != stage.stage_id:
                continue  # aborted or already answered
            if stage.spec.emit:
                req.queue.put_nowait(StageResult(request_id, stage.stage_id, payload, finished))
            if finished:
                if last:
                    del self._requests[request_id]
                    req.queue.put_nowait(_END)
                else:
                    req.stage += 1
                    self._send_to_stage(
                        req.stage, request_id, pack(Kind.ADD, pickle.dumps((request_id, payload), protocol=5))
                    )

    def _on_exit(self, stage: _Stage) -> None:
        assert self._loop is not None
        self._loop.remove_reader(stage.proc.sentinel)
        stage.proc.join(0)
        stage.exited = True
        code = stage.proc.exitcode
        if self._state in ("stopping", "stopped") or self._dead_error is not None:
            return
        last_words = self._board.read_last_words(stage.stage_id) if self._board is not None else None
        reason = f"stage {stage.stage_id} exited unexpectedly (exit code {code})"
        details = last_words or fatal_record(stage_id=stage.stage_id)
        logger.critical("stage %d exited unexpectedly with code %s", stage.stage_id, code)
        self._schedule_die(details, self._code_for(code), None if last_words else reason)

    def _on_channel_closed(self, stage: _Stage, exc: BaseException | None, which: str) -> None:
        if self._state in ("stopping", "stopped") or self._dead_error is not None:
            return
        assert self._loop is not None
        # EOF usually means the stage is exiting: give the sentinel a moment to say how it ended.
        self._loop.call_later(0.2, self._channel_verdict, stage, exc, which)

    def _channel_verdict(self, stage: _Stage, exc: BaseException | None, which: str) -> None:
        if self._dead_error is not None or self._state in ("stopping", "stopped"):
            return
        if not stage.proc.is_alive():
            self._on_exit(stage)
            return
        logger.critical("stage %d: %s channel broke (%s)", stage.stage_id, which, exc or "EOF")
        reason = f"the {which} channel of stage {stage.stage_id} broke"
        self._schedule_die(fatal_record(stage_id=stage.stage_id), ExitCode.BROKEN_IPC, reason)

    @staticmethod
    def _code_for(child_code: int | None) -> ExitCode:
        if child_code is not None:
            with contextlib.suppress(ValueError):
                code = ExitCode(child_code)
                if code is not ExitCode.OK:
                    return code
        return ExitCode.STAGE_LOST

    # -- requests --------------------------------------------------------------------------

    def _send_to_stage(self, stage_id: int, request_id: str | None, data: bytes) -> None:
        self._write(self._stages[stage_id], data)

    def _write(self, stage: _Stage, data: bytes) -> None:
        writer = stage.writer
        if writer is None or writer.is_closing():
            return
        writer.write(len(data).to_bytes(4, "big", signed=True) + data)

    def _fail_request(self, request_id: str, details: OmniErrorDetails) -> None:
        req = self._requests.pop(request_id, None)
        if req is not None:
            req.queue.put_nowait(details.replace(request_id=request_id))

    def _answer_all(self, details: OmniErrorDetails) -> None:
        requests, self._requests = self._requests, {}
        for rid, req in requests.items():
            req.queue.put_nowait(details.replace(request_id=rid))

    async def _watch(self) -> None:
        cfg = self.config
        assert self._loop is not None
        while self._dead_error is None and self._state in ("starting", "running", "draining"):
            await asyncio.sleep(cfg.watchdog_interval)
            now = self._loop.time()
            for rid, req in list(self._requests.items()):
                if req.deadline is not None and now > req.deadline:
                    self._fail_request(
                        rid, lifecycle_error("timeout", f"Request timed out in stage {req.stage}", stage_id=req.stage)
                    )
                    self._send_to_stage(req.stage, None, pack(Kind.ABORT, rid.encode()))
            if self._state in ("running", "draining"):
                self._check_heartbeats(time.monotonic_ns())

    def _check_heartbeats(self, now_ns: int) -> None:
        assert self._board is not None
        cfg = self.config
        for stage in self._stages:
            age = (now_ns - self._board.last_beat(stage.stage_id)) / 1e9
            if age <= cfg.heartbeat_timeout:
                if stage.hung_since is not None:
                    logger.warning("stage %d is answering again", stage.stage_id)
                stage.hung_since = None
                continue
            if stage.hung_since is None:
                stage.hung_since = now_ns / 1e9
                logger.error("stage %d: no heartbeat for %.1fs; failing its requests with 504", stage.stage_id, age)
                for rid, req in list(self._requests.items()):
                    if req.stage == stage.stage_id:
                        self._fail_request(
                            rid,
                            lifecycle_error(
                                "timeout", f"Stage {stage.stage_id} stopped responding", stage_id=stage.stage_id
                            ),
                        )
            elif now_ns / 1e9 - stage.hung_since > cfg.hang_grace:
                reason = f"stage {stage.stage_id} stopped responding"
                self._schedule_die(fatal_record(stage_id=stage.stage_id), ExitCode.STAGE_HUNG, reason)

    # -- failing and stopping --------------------------------------------------------------

    def _schedule_die(self, details: OmniErrorDetails, code: ExitCode, reason: str | None = None) -> None:
        """Answer everything now (synchronously, inside the callback that saw the failure).

        `reason` is for the logs and StageStartupError; clients get the canonical record."""
        if self._dead_error is not None:
            return
        self._dead_reason = reason or details.message
        if self._state == "starting":
            code = ExitCode.STARTUP_FAILURE
        if not (details.fatal and details.category == "server"):
            # At startup the message is the root cause (no client sees it before StageStartupError);
            # at runtime every request gets the canonical fatal record.
            root_cause = details.message if self._state == "starting" else None
            details = fatal_record(stage_id=details.stage_id, root_cause=root_cause)
        self._dead_error = details
        self._exit_code = int(code)
        self._state = "dead"
        logger.critical(
            "pipeline dead: stage %s: %s (exit code %d); answering %d requests, stopping stages",
            details.stage_id,
            self._dead_reason,
            int(code),
            len(self._requests),
        )
        self._answer_all(details)
        for stage in self._stages:
            if not stage.ready.done():
                stage.ready.set_exception(StageStartupError(details))
                stage.ready.exception()  # retrieved: the failure is raised from start() instead
        self._start_stop()

    async def _die(self, details: OmniErrorDetails, code: ExitCode, reason: str | None = None) -> None:
        self._schedule_die(details, code, reason)
        if self._stop_task is not None:
            await asyncio.shield(self._stop_task)

    def _start_stop(self) -> None:
        if self._stop_task is None:
            self._stop_task = asyncio.ensure_future(self._stop_all())

    async def _stop_all(self) -> None:
        cfg = self.config
        try:
            # One deadline for every stage (told SHUTDOWN or not): SIGTERM now, SIGKILL at stop_timeout.
            # The worker's handler only records SIGTERM, so a healthy stage still shuts its engine down.
            for stage in self._stages:
                if stage.proc.pid is not None and stage.proc.exitcode is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(stage.proc.pid, signal.SIGTERM)
            await self._wait_exit(cfg.stop_timeout)
            for stage in self._stages:
                if stage.proc.pid is not None and stage.proc.exitcode is None:
                    logger.error("stage %d ignored SIGTERM for %.1fs; SIGKILL", stage.stage_id, cfg.stop_timeout)
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(stage.proc.pid, signal.SIGKILL)
            await self._wait_exit(cfg.stop_timeout)
        finally:
            self._release()

    async def _wait_exit(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(s.proc.pid is None or s.proc.exitcode is not None for s in self._stages):
                return
            await asyncio.sleep(0.01)

    def _release(self) -> None:
        loop = self._loop
        for stage in self._stages:
            if loop is not None and not stage.exited and stage.proc.pid is not None:
                loop.remove_reader(stage.proc.sentinel)
            for transport in (stage.reader, stage.writer):
                if transport is not None:
                    transport.close()
        if self._board is not None:
            self._board.unlink()
        if self._finalizer is not None:
            self._finalizer.cancel()
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._signals is not None:
            self._signals.remove()
        if self._state != "dead":
            self._state = "stopped"
        assert self._stopped is not None
        self._stopped.set()
        for callback in self._dead_callbacks:
            try:
                callback()
            except Exception:
                logger.exception("dead callback failed")

    # -- signals ---------------------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        logger.warning("received %s; stopping the pipeline", signal.Signals(signum).name)
        drain = self.config.drain_timeout if signum == signal.SIGTERM else 0.0
        self._signal_task = asyncio.ensure_future(
            self.shutdown(drain_timeout=drain, exit_code=exit_code_for_signal(signum))
        )

    def _on_force(self, signum: int) -> None:
        logger.warning("second %s: killing every stage now", signal.Signals(signum).name)
        self._exit_code = self._exit_code or exit_code_for_signal(signum)
        if self._state not in ("dead",):
            self._state = "stopping"
        self._answer_all(lifecycle_error("unavailable", "The server is shutting down", stage_id=None))
        for stage in self._stages:
            if stage.proc.pid is not None and stage.proc.exitcode is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(stage.proc.pid, signal.SIGKILL)
        self._start_stop()


def _emergency_stop(stages: list[_Stage], board: StatusBoard, config: LifecycleConfig) -> None:
    """Interpreter exit without `shutdown()`: stop the stages before multiprocessing joins them."""
    for stage in stages:
        with contextlib.suppress(Exception):
            if stage.proc.is_alive():
                stage.proc.terminate()
    for stage in stages:
        with contextlib.suppress(Exception):
            stage.proc.join(config.stop_timeout)
            if stage.proc.is_alive():
                stage.proc.kill()
                stage.proc.join(config.stop_timeout)
    board.unlink()
