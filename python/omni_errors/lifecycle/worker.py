"""The loop a stage process runs around its engine.

`run_stage` is the spawn target. It builds the engine under try/except and answers READY or
FAILED(details) as its first message (the startup handshake, seed 004), then serves: requests in,
outputs and per-request error frames out. A per-request failure is that request's error frame and
the stage keeps serving. A fatal failure (fatal by type, or anything escaping `step()` or the loop)
is logged here with its traceback, written to the status board, sent as one FATAL frame, the
engine's `shutdown()` runs under a deadline, and the process exits with a code from `ExitCode`.
The fatal frame goes out before `shutdown()` so clients are answered without waiting for cleanup.
"""

from __future__ import annotations

import logging
import pickle
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

import omni_errors
from omni_errors import OmniErrorDetails
from omni_errors.lifecycle.channels import Kind, StatusBoard, pack, pack_failed
from omni_errors.lifecycle.engine import RequestFailure, StageEngine, StageSpec
from omni_errors.lifecycle.exitcodes import ExitCode, exit_code_for_signal
from omni_errors.lifecycle.failures import classify_failure, fatal_cause
from omni_errors.lifecycle.signals import SignalLatch

__all__ = ["WorkerConfig", "run_stage"]

logger = logging.getLogger("omni_errors.lifecycle.worker")

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


def run_stage(
    stage_id: int,
    spec: StageSpec,
    conn_in: Connection,
    conn_out: Connection,
    board_name: str,
    slots: int,
    config: WorkerConfig,
) -> None:
    """Spawn target of a stage process; ends with SystemExit(code) (multiprocessing reports it)."""
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format=f"(stage {stage_id} pid %(process)d) %(levelname)s %(name)s: %(message)s"
        )
    latch = SignalLatch()
    latch.install()
    board = StatusBoard.attach(board_name, slots)
    worker = _Worker(stage_id, conn_in, conn_out, board, latch, config)
    try:
        code = worker.main(spec)
    finally:
        board.close()
        latch.close()
        conn_in.close()
        conn_out.close()
    sys.exit(int(code))


class _Worker:
    def __init__(
        self,
        stage_id: int,
        conn_in: Connection,
        conn_out: Connection,
        board: StatusBoard,
        latch: SignalLatch,
        config: WorkerConfig,
    ) -> None:
        self.stage_id = stage_id
        self.conn_in = conn_in
        self.conn_out = conn_out
        self.board = board
        self.latch = latch
        self.config = config
        self.engine: StageEngine | None = None

    def main(self, spec: StageSpec) -> int:
        self.board.beat(self.stage_id, time.monotonic_ns())
        try:
            self.engine = spec.build()
        except BaseException as exc:
            return self._startup_failed(exc)
        forced = False
        try:
            self._send(pack(Kind.READY))
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
        except BaseException as exc:  # anything escaping the loop is fatal
            return self._die(exc, (fatal_cause(exc) or (exc, ExitCode.FATAL_ENGINE))[1])
        finally:
            if not forced:
                self._shutdown_engine()

    # -- startup ---------------------------------------------------------------------------

    def _startup_failed(self, exc: BaseException) -> int:
        tb = "".join(traceback.format_exception(exc))
        logger.error("stage %d failed to start:\n%s", self.stage_id, tb)
        # Not forced to the generic fatal text: the supervisor raises StageStartupError with this root cause.
        details = classify_failure(exc, request_id=None, stage_id=self.stage_id)
        self.board.write_last_words(self.stage_id, details)
        try:
            self._send(pack_failed(details, tb))
        except OSError:
            pass  # the supervisor reads the status board instead
        return int(ExitCode.STARTUP_FAILURE)

    # -- serving ---------------------------------------------------------------------------

    def _loop(self) -> None:
        engine = self.engine
        assert engine is not None
        while True:
            self.board.beat(self.stage_id, time.monotonic_ns())
            if self.latch.signum is not None:
                raise _Stop(exit_code_for_signal(self.latch.signum))
            busy = engine.has_unfinished_requests()
            self._receive(0.0 if busy else self.config.heartbeat_interval)
            if engine.has_unfinished_requests():
                self._step(engine)

    def _receive(self, timeout: float) -> None:
        ready = wait([self.conn_in, self.latch.wake_fd], timeout)
        if self.latch.wake_fd in ready:
            self.latch.drain()
        if self.conn_in not in ready:
            return
        for _ in range(_MAX_MESSAGES_PER_TURN):
            try:
                msg = self.conn_in.recv_bytes()
            except (EOFError, OSError) as exc:
                logger.error("stage %d: request channel closed (%s); supervisor gone", self.stage_id, exc)
                raise _Stop(int(ExitCode.BROKEN_IPC)) from exc
            self._handle(msg)
            if not self.conn_in.poll(0):
                return

    def _handle(self, msg: bytes) -> None:
        engine = self.engine
        assert engine is not None
        kind, body = msg[0], memoryview(msg)[1:]
        if kind == Kind.ADD:
            request_id, payload = pickle.loads(body)
            self._guard(request_id, engine.add_request, request_id, payload)
        elif kind == Kind.ABORT:
            request_id = bytes(body).decode()
            self._guard(request_id, engine.abort_request, request_id)
        elif kind == Kind.SHUTDOWN:
            raise _Stop(int(ExitCode.OK))
        else:
            raise _Fatal(ValueError(f"unknown message kind {kind} from supervisor"), ExitCode.BROKEN_IPC)

    def _guard(self, request_id: str, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:
            self._request_failed(request_id, exc)

    def _step(self, engine: StageEngine) -> None:
        outputs = []
        for item in engine.step():  # an exception here escapes the loop: fatal
            if isinstance(item, RequestFailure):
                self._request_failed(item.request_id, item.error)
            else:
                outputs.append(tuple(item))
        if outputs:
            self._send(pack(Kind.OUTPUTS, pickle.dumps(outputs, protocol=5)))

    def _request_failed(self, request_id: str, exc: BaseException) -> None:
        fatal = fatal_cause(exc)
        if fatal is not None:
            raise _Fatal(exc, fatal[1])
        logger.warning("stage %d: request %s failed: %s: %s", self.stage_id, request_id, type(exc).__name__, exc)
        details = classify_failure(exc, request_id=request_id, stage_id=self.stage_id)
        self._send(pack(Kind.REQUEST_ERROR, omni_errors.encode(details)))

    def _send(self, data: bytes) -> None:
        try:
            self.conn_out.send_bytes(data)
        except OSError as exc:  # EPIPE: the supervisor is gone
            logger.error("stage %d: result channel broken (%s)", self.stage_id, exc)
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
        details: OmniErrorDetails = classify_failure(
            cause[0] if cause else exc, request_id=None, stage_id=self.stage_id, fatal=True
        )
        self.board.write_last_words(self.stage_id, details)
        try:
            self.conn_out.send_bytes(pack(Kind.FATAL, bytes((int(code),)) + omni_errors.encode(details)))
        except OSError:
            logger.error("stage %d: could not send the fatal frame; it is on the status board", self.stage_id)
        return int(code)

    def _shutdown_engine(self) -> None:
        engine, self.engine = self.engine, None
        if engine is None:
            return
        done = threading.Event()

        def _run() -> None:
            try:
                engine.shutdown()
            except BaseException:
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
