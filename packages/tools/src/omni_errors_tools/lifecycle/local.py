"""The local stage link: a child process (multiprocessing spawn), two pipes, one shm status slot.

Supervisor side, `LocalStageLink`: the result pipe and the process sentinel are loop readers, so a
fatal frame, an unexpected exit and a broken channel are seen the moment they happen. Requests go
through an asyncio write transport, so a slow or hung stage never blocks the loop; its buffer is
the link's high-water mark. Stage side, `PipeWorkerLink`: blocking `Connection`s and the slot.
Payloads are pickled (protocol 5): both ends are this host's processes, started by us.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import pickle
import signal
import sys
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from multiprocessing.context import SpawnContext
from multiprocessing.process import BaseProcess
from typing import Any

import omni_errors
from omni_errors import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode, stage_exit_code
from omni_errors_tools.lifecycle.channels import FrameReader, Kind, StatusBoard, pack, pack_failed, unpack_failed
from omni_errors_tools.lifecycle.engine import StageSpec
from omni_errors_tools.lifecycle.links import (
    Abort,
    Add,
    Command,
    LinkClosedError,
    LinkListener,
    LinkRefusedError,
    Output,
    Refusal,
    Shutdown,
)
from omni_errors_tools.lifecycle.worker import WorkerConfig, serve_stage

__all__ = ["LocalStageLink", "PipeWorkerLink", "run_local_stage"]

logger = logging.getLogger(__name__)

#: Requests buffered for a stage that is not reading; past this, `add` answers 503. 32 MiB is
#: ~100k requests of the reference pipeline, far beyond what a healthy stage leaves unread.
MAX_BUFFERED_BYTES = 32 << 20
#: EOF usually means the stage is exiting: how long the sentinel gets to say how it ended.
_EXIT_VERDICT_DELAY = 0.2


class _WriterProtocol(asyncio.Protocol):
    def __init__(self, on_lost: Callable[[BaseException | None], None]) -> None:
        self._on_lost = on_lost

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost(exc)


class LocalStageLink:
    """A stage in a child process of this one (see the module docstring)."""

    def __init__(
        self, stage_id: int, spec: StageSpec, ctx: SpawnContext, board: StatusBoard, config: WorkerConfig
    ) -> None:
        self.stage_id = stage_id
        self.name = spec.name
        self._spec = spec
        self._ctx = ctx
        self._board = board
        self._config = config
        self._proc: BaseProcess | None = None
        self._writer: asyncio.WriteTransport | None = None
        self._reader: asyncio.ReadTransport | None = None
        self._listener: LinkListener | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._reported = False
        self._watching = False

    @property
    def where(self) -> str:
        return f"pid {self.pid}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.pid is not None and self._proc.exitcode is None

    async def open(self, listener: LinkListener) -> None:
        self._listener = listener
        loop = self._loop = asyncio.get_running_loop()
        to_child_r, to_child_w = self._ctx.Pipe(duplex=False)
        from_child_r, from_child_w = self._ctx.Pipe(duplex=False)
        suffix = f"-{self.name}" if self.name else ""
        proc = self._proc = self._ctx.Process(
            target=run_local_stage,
            args=(
                self.stage_id,
                self._spec,
                to_child_r,
                from_child_w,
                self._board.name,
                self._board.slots,
                self._config,
            ),
            name=f"omni-stage-{self.stage_id}{suffix}",
        )
        try:
            proc.start()
        finally:
            to_child_r.close()
            from_child_w.close()
        logger.info("stage %d (%s) started, pid %d", self.stage_id, self.name or "-", proc.pid)
        rfile = os.fdopen(os.dup(from_child_r.fileno()), "rb", buffering=0)
        wfile = os.fdopen(os.dup(to_child_w.fileno()), "wb", buffering=0)
        from_child_r.close()
        to_child_w.close()
        reader = FrameReader(self._on_message, lambda exc: self._on_channel_closed(exc, "result"))
        self._reader, _ = await loop.connect_read_pipe(lambda: reader, rfile)
        self._writer, _ = await loop.connect_write_pipe(
            lambda: _WriterProtocol(lambda exc: self._on_channel_closed(exc, "request")), wfile
        )
        loop.add_reader(proc.sentinel, self._on_exit)
        self._watching = True

    # -- requests ---------------------------------------------------------------------------

    def add(self, request_id: str, payload: Any) -> None:
        writer = self._writer
        if writer is not None and writer.get_write_buffer_size() > MAX_BUFFERED_BYTES:
            raise LinkRefusedError(
                Refusal.FULL, f"stage {self.stage_id} has {MAX_BUFFERED_BYTES >> 20} MiB of requests unread"
            )
        self._write(pack(Kind.ADD, pickle.dumps((request_id, payload), protocol=5)))

    def abort(self, request_id: str) -> None:
        self._write(pack(Kind.ABORT, request_id.encode()))

    def shutdown(self) -> None:
        self._write(pack(Kind.SHUTDOWN))

    def _write(self, data: bytes) -> None:
        writer = self._writer
        if writer is None or writer.is_closing():
            return
        writer.write(len(data).to_bytes(4, "big", signed=True) + data)

    # -- liveness -----------------------------------------------------------------------------

    def progress_age(self, now: float) -> float:
        return now - self._board.last_beat(self.stage_id) / 1e9

    def poll(self, now: float) -> None:
        """Nothing periodic: a local stage's death is seen by its sentinel, at once."""

    # -- the kill path's steps -----------------------------------------------------------------

    def terminate(self) -> None:
        self._signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.alive:
            logger.error("stage %d (pid %s): SIGKILL", self.stage_id, self.pid)
        self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        if self.alive and self._proc is not None and self._proc.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, sig)

    def close(self) -> None:
        if self._watching and self._loop is not None and self._proc is not None:
            self._loop.remove_reader(self._proc.sentinel)
        self._watching = False
        for transport in (self._reader, self._writer):
            if transport is not None:
                transport.close()

    def join(self, timeout: float) -> None:
        """Blocking wait for the process (interpreter exit only, when no loop runs)."""
        if self._proc is not None and self._proc.pid is not None:
            with contextlib.suppress(Exception):
                self._proc.join(timeout)

    # -- what the stage says ------------------------------------------------------------------

    def _on_message(self, kind: int, body: memoryview) -> None:
        listener = self._listener
        assert listener is not None
        if kind == Kind.OUTPUTS:
            listener.on_outputs(self, pickle.loads(body))
        elif kind == Kind.REQUEST_ERROR:
            listener.on_request_error(self, omni_errors.decode(body))
        elif kind == Kind.READY:
            listener.on_ready(self)
        elif kind == Kind.FAILED:
            details, tb = unpack_failed(body)
            listener.on_startup_failed(self, details, tb)
        elif kind == Kind.FATAL:
            self._reported = True
            listener.on_fatal(self, omni_errors.decode(body[1:]), stage_exit_code(body[0]))
        else:
            why = f"unknown message kind {kind} from stage {self.stage_id}"
            raise ValueError(why)  # omni-errors: ignore[OE101]: a protocol defect: the reader ends the link

    def _on_exit(self) -> None:
        assert self._loop is not None and self._proc is not None
        self._loop.remove_reader(self._proc.sentinel)
        self._watching = False
        self._proc.join(0)
        code = self._proc.exitcode
        self._report_lost(stage_exit_code(code), f"stage {self.stage_id} exited unexpectedly (exit code {code})")

    def _on_channel_closed(self, exc: BaseException | None, which: str) -> None:
        if self._loop is not None and not self._reported:
            self._loop.call_later(_EXIT_VERDICT_DELAY, self._channel_verdict, exc, which)

    def _channel_verdict(self, exc: BaseException | None, which: str) -> None:
        if not self.alive:
            if self._watching:
                self._on_exit()
            return
        self._report_lost(ExitCode.BROKEN_IPC, f"the {which} channel of stage {self.stage_id} broke ({exc or 'EOF'})")

    def _report_lost(self, code: ExitCode, reason: str) -> None:
        if self._reported or self._listener is None:
            return
        self._reported = True
        self._listener.on_lost(self, self._board.read_last_words(self.stage_id), code, reason)


class PipeWorkerLink:
    """The stage's end of a local link: blocking pipes and its slot on the status board."""

    def __init__(self, stage_id: int, conn_in: Connection, conn_out: Connection, board: StatusBoard) -> None:
        self._slot = stage_id
        self._in = conn_in
        self._out = conn_out
        self._board = board

    def wait(self, timeout: float, wake_fd: int) -> bool:
        return self._in in wait([self._in, wake_fd], timeout)

    def commands(self, limit: int) -> list[Command]:
        out: list[Command] = []
        try:
            while len(out) < limit and self._in.poll(0):
                out.append(_command(self._in.recv_bytes()))
        except (EOFError, OSError) as exc:
            raise LinkClosedError(f"request channel closed ({exc})") from exc
        return out

    def beat(self, now_ns: int) -> None:
        self._board.beat(self._slot, now_ns)

    def ready(self) -> None:
        self._send(pack(Kind.READY))

    def failed(self, details: OmniErrorDetails, traceback: str) -> None:
        self._board.write_last_words(self._slot, details)
        with contextlib.suppress(LinkClosedError):  # the supervisor reads the status board instead
            self._send(pack_failed(details, traceback))

    def outputs(self, outputs: Sequence[Output]) -> None:
        self._send(pack(Kind.OUTPUTS, pickle.dumps(list(outputs), protocol=5)))

    def request_errors(self, frames: Sequence[bytes]) -> None:
        for frame in frames:
            self._send(pack(Kind.REQUEST_ERROR, frame))

    def fatal(self, details: OmniErrorDetails, code: ExitCode) -> None:
        self._board.write_last_words(self._slot, details)
        try:
            self._send(pack(Kind.FATAL, bytes((int(code),)) + omni_errors.encode(details)))
        except LinkClosedError:
            logger.error("stage %d: could not send the fatal frame; it is on the status board", self._slot)

    def close(self, code: int) -> None:
        self._board.close()
        self._in.close()
        self._out.close()

    def _send(self, data: bytes) -> None:
        try:
            self._out.send_bytes(data)
        except OSError as exc:  # EPIPE: the supervisor is gone
            raise LinkClosedError(f"result channel broken ({exc})") from exc


def run_local_stage(
    stage_id: int,
    spec: StageSpec,
    conn_in: Connection,
    conn_out: Connection,
    board_name: str,
    slots: int,
    config: WorkerConfig,
) -> None:
    """Spawn target of a local stage; ends with SystemExit(code) (multiprocessing reports it)."""
    link = PipeWorkerLink(stage_id, conn_in, conn_out, StatusBoard.attach(board_name, slots))
    sys.exit(serve_stage(stage_id, spec, link, config))


def _command(msg: bytes) -> Command:
    kind, body = msg[0], memoryview(msg)[1:]
    if kind == Kind.ADD:
        request_id, payload = pickle.loads(body)
        return Add(request_id, payload)
    if kind == Kind.ABORT:
        return Abort(bytes(body).decode())
    if kind == Kind.SHUTDOWN:
        return Shutdown()
    raise LinkClosedError(f"unknown message kind {kind} from the supervisor")
