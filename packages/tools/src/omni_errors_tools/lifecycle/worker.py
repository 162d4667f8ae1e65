"""The loop a stage process runs around its engine, over any `links.WorkerLink`.

`serve_stage` builds the engine under try/except and answers READY or FAILED(details) as its first
message (the startup handshake, seed 004), then serves: requests in, outputs and per-request error
frames out. A per-request failure is that request's error frame and the stage keeps serving. A
fatal failure (fatal by type, or anything escaping `step()` or the loop) is logged here with its
traceback, sent as the FATAL last words, the engine's `shutdown()` runs under a deadline, and the
stage exits with a code from `ExitCode`. The last words go out before `shutdown()` so clients are
answered without waiting for cleanup. The link is local (`local.run_local_stage`, the spawn
target) or remote (`remote.stage_side.run_remote_stage`); this loop does not know which.
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import omni_errors
from omni_errors.fatal.exitcodes import ExitCode, exit_code_for_signal
from omni_errors.fatal.fast_exit import skip_final_collections
from omni_errors.fatal.policy import classify_failure, fatal_cause
from omni_errors_tools.lifecycle.engine import RequestFailure, StageEngine, StageSpec
from omni_errors_tools.lifecycle.links import Abort, Add, LinkClosedError, Output, Shutdown, WorkerLink
from omni_errors_tools.lifecycle.signals import SignalLatch

__all__ = ["WorkerConfig", "serve_stage"]

logger = logging.getLogger(__name__)

_MAX_MESSAGES_PER_TURN = 1024  # bounded so a flood of requests cannot starve step()


@dataclass(frozen=True)
class WorkerConfig:
    heartbeat_interval: float = 0.2  # longest idle wait; the heartbeat is written every loop turn
    shutdown_timeout: float = 2.0  # deadline for engine.shutdown()


class _Fatal(Exception):
    """Internal: carries a fatal failure and its exit code out of the loop."""

    def __init__(self, exc: BaseException, code: ExitCode) -> None:
        super().__init__(str(exc))
        self.exc = exc
        self.code = code


class _Stop(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


def serve_stage(stage_id: int, spec: StageSpec, link: WorkerLink, config: WorkerConfig) -> int:
    """Run the stage until it stops; returns the exit code (the caller exits with it)."""
    skip_final_collections()  # its stop deadline is 3 s; torch's teardown alone took longer
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format=f"(stage {stage_id} pid %(process)d) %(levelname)s %(name)s: %(message)s"
        )
    latch = SignalLatch()
    latch.install()
    code = int(ExitCode.BROKEN_IPC)
    try:
        code = _Worker(stage_id, link, latch, config).main(spec)
    finally:
        latch.close()
        link.close(code)
    return code


class _Worker:
    def __init__(self, stage_id: int, link: WorkerLink, latch: SignalLatch, config: WorkerConfig) -> None:
        self.stage_id = stage_id
        self.link = link
        self.latch = latch
        self.config = config
        self.engine: StageEngine | None = None

    def main(self, spec: StageSpec) -> int:
        self.link.beat(time.monotonic_ns())
        try:
            self.engine = spec.build()
        except BaseException as exc:  # omni-errors: ignore[OE202]: reported as the startup failure (FAILED), then exit
            return self._startup_failed(exc)
        forced = False
        try:
            self.link.beat(time.monotonic_ns())  # building took a while: that was not a hang
            self._send(self.link.ready)
            self._loop()
            return int(ExitCode.OK)  # pragma: no cover - _loop only ends by raising
        except _Stop as stop:
            return stop.code
        except _Fatal as fatal:
            return self._die(fatal.exc, fatal.code)
        except KeyboardInterrupt:  # second SIGINT: forced exit, no cleanup beyond the finally
            forced = True
            logger.warning("stage %d: second SIGINT, exiting without engine shutdown", self.stage_id)
            return int(ExitCode.SIGINT)
        except BaseException as exc:  # omni-errors: ignore[OE202]: fatal: reported, then exit
            return self._die(exc, (fatal_cause(exc) or (exc, ExitCode.FATAL_ENGINE))[1])
        finally:
            if not forced:
                self._shutdown_engine()

    # -- startup ---------------------------------------------------------------------------

    def _startup_failed(self, exc: BaseException) -> int:
        tb = "".join(traceback.format_exception(exc))
        logger.error("stage %d failed to start:\n%s", self.stage_id, tb)
        # Not forced to the generic fatal text: the supervisor raises StageStartupError with this root cause.
        self.link.failed(classify_failure(exc, request_id=None, stage_id=self.stage_id), tb)
        return int(ExitCode.STARTUP_FAILURE)

    # -- serving ---------------------------------------------------------------------------

    def _loop(self) -> None:
        engine = self.engine
        assert engine is not None
        while True:
            self.link.beat(time.monotonic_ns())
            if self.latch.signum is not None:
                raise _Stop(exit_code_for_signal(self.latch.signum))
            busy = engine.has_unfinished_requests()
            self._receive(0.0 if busy else self.config.heartbeat_interval)
            if engine.has_unfinished_requests():
                self._step(engine)

    def _receive(self, timeout: float) -> None:
        ready = self.link.wait(timeout, self.latch.wake_fd)
        self.latch.drain()
        if not ready:
            return
        try:
            commands = self.link.commands(_MAX_MESSAGES_PER_TURN)
        except LinkClosedError as exc:
            logger.error("stage %d: %s; supervisor gone", self.stage_id, exc)
            raise _Stop(int(ExitCode.BROKEN_IPC)) from exc
        engine = self.engine
        assert engine is not None
        for command in commands:
            if isinstance(command, Add):
                self._guard(command.request_id, engine.add_request, command.request_id, command.payload)
            elif isinstance(command, Abort):
                self._guard(command.request_id, engine.abort_request, command.request_id)
            elif isinstance(command, Shutdown):
                raise _Stop(int(ExitCode.OK))

    def _guard(self, request_id: str, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # omni-errors: ignore[OE202]: reported as the request's error frame
            frame = self._request_failed(request_id, exc)
            self._send(self.link.request_errors, [frame])

    def _step(self, engine: StageEngine) -> None:
        outputs: list[Output] = []
        errors: list[bytes] = []
        try:
            for item in engine.step():  # an exception here escapes the loop: fatal
                if isinstance(item, RequestFailure):
                    errors.append(self._request_failed(item.request_id, item.error))
                else:
                    outputs.append((item[0], item[1], item[2]))
        finally:
            if errors:  # one message for the step's failures: a burst costs one send, not thousands
                self._send(self.link.request_errors, errors)
        if outputs:
            self._send(self.link.outputs, outputs)

    def _request_failed(self, request_id: str, exc: BaseException) -> bytes:
        fatal = fatal_cause(exc)
        if fatal is not None:
            raise _Fatal(exc, fatal[1])
        logger.warning("stage %d: request %s failed: %s: %s", self.stage_id, request_id, type(exc).__name__, exc)
        return omni_errors.encode(classify_failure(exc, request_id=request_id, stage_id=self.stage_id))

    def _send(self, send: Callable[..., None], *args: Any) -> None:
        try:
            send(*args)
        except LinkClosedError as exc:
            logger.error("stage %d: %s; supervisor gone", self.stage_id, exc)
            raise _Stop(int(ExitCode.BROKEN_IPC)) from exc

    # -- fatal exit ------------------------------------------------------------------------

    def _die(self, exc: BaseException, code: ExitCode) -> int:
        logger.critical(
            "stage %d: fatal %s, shutting the stage down (exit code %d)\n%s",
            self.stage_id,
            type(exc).__name__,
            int(code),
            "".join(traceback.format_exception(exc)),
        )
        cause = fatal_cause(exc)
        details = classify_failure(cause[0] if cause else exc, request_id=None, stage_id=self.stage_id, fatal=True)
        self.link.fatal(details, code)
        return int(code)

    def _shutdown_engine(self) -> None:
        engine, self.engine = self.engine, None
        if engine is None:
            return
        done = threading.Event()

        def _run() -> None:
            try:
                engine.shutdown()
            except BaseException:  # omni-errors: ignore[OE202]: logged; the shutdown deadline decides
                logger.exception("stage %d: engine shutdown raised", self.stage_id)
            finally:
                done.set()

        thread = threading.Thread(target=_run, name=f"stage-{self.stage_id}-shutdown", daemon=True)
        thread.start()
        if not done.wait(self.config.shutdown_timeout):
            logger.error(
                "stage %d: engine shutdown exceeded its %.1fs deadline; exiting anyway",
                self.stage_id,
                self.config.shutdown_timeout,
            )
