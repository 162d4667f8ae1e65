"""The stage's side of the remote link: `ZmqWorkerLink` (a `links.WorkerLink`) and `run_remote_stage`.

The worker loop runs in the main thread and may spend seconds inside one engine step, so the
socket to the supervisor belongs to an I/O thread (`stage_io.IoThread`) that keeps the link
honest meanwhile; this module is the main thread's end of it, an inproc PAIR socket. When the
supervisor is gone (deadline, gap, or SHUTDOWN) the main thread gets `shutdown_timeout +
stop_timeout` to exit before the I/O thread ends the process.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Sequence
from typing import Any

import omni_errors
import zmq
from omni_errors import OmniErrorDetails
from omni_errors.errors import OmniErrorsError
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.lifecycle.channels import Kind
from omni_errors_tools.lifecycle.engine import StageSpec
from omni_errors_tools.lifecycle.links import Abort, Add, Command, LinkClosedError, Output, Shutdown
from omni_errors_tools.lifecycle.remote.config import StageConnectConfig
from omni_errors_tools.lifecycle.remote.messages import (
    CLOSE,
    LOST,
    Hello,
    Welcome,
    header,
    pack,
    parse_header,
    recv_frames,
    unpack,
)
from omni_errors_tools.lifecycle.remote.stage_io import IoThread
from omni_errors_tools.lifecycle.worker import WorkerConfig, serve_stage

__all__ = ["StageJoinError", "ZmqWorkerLink", "run_remote_stage"]

logger = logging.getLogger(__name__)


class StageJoinError(OmniErrorsError):
    """The stage could not join its server: refused, not authenticated, or no answer in time."""


class ZmqWorkerLink:
    """The stage's end of a remote link (a `links.WorkerLink`); made by `join`."""

    def __init__(self, ctx: zmq.Context[Any], pair: zmq.Socket[Any], io: IoThread, cfg: StageConnectConfig) -> None:
        self._ctx, self._pair, self._io, self._cfg = ctx, pair, io, cfg
        self._poller = zmq.Poller()
        self._poller.register(pair, zmq.POLLIN)
        self._wake_fd: int | None = None
        self._closed = False

    @classmethod
    def join(cls, cfg: StageConnectConfig, hello: Hello) -> tuple[ZmqWorkerLink, Welcome]:
        """Connect, say HELLO and wait for WELCOME (`cfg.connect_timeout`). Raises StageJoinError,
        or LinkConfigError before connecting when a key file is wrong."""
        curve = cfg.curve_keys()
        ctx: zmq.Context[Any] = zmq.Context()
        pair = ctx.socket(zmq.PAIR)
        inproc = f"inproc://omni-link-{secrets.token_hex(4)}"
        pair.bind(inproc)
        pair.setsockopt(zmq.SNDTIMEO, int((cfg.connect_timeout + cfg.linger) * 1000))
        io = IoThread(ctx, cfg, curve, hello, inproc)
        link = cls(ctx, pair, io, cfg)
        io.start()
        try:
            if not pair.poll(int(cfg.connect_timeout * 1000)):
                failed = io.handshake_failures
                why = (
                    f"the CURVE handshake failed {failed} times (a wrong server key, or something that closes "
                    "connections)"
                    if failed
                    else "is `omni-errors serve` running there and expecting this stage remotely?"
                )
                raise StageJoinError(f"no answer from {cfg.endpoint} within {cfg.connect_timeout:g}s: {why}")
            frames = recv_frames(pair)
            kind = parse_header(frames[0].buffer)[0]
            if kind != Kind.WELCOME:
                raise StageJoinError(frames[1].bytes.decode("utf-8", "replace"))
            return link, Welcome.decode(frames[1].buffer)
        except BaseException:
            link.close(int(ExitCode.STARTUP_FAILURE))
            raise

    def wait(self, timeout: float, wake_fd: int) -> bool:
        if self._wake_fd != wake_fd:
            self._poller.register(wake_fd, zmq.POLLIN)
            self._wake_fd = wake_fd
        if self._io.failed:
            return True  # commands() says why
        events = dict(self._poller.poll(int(timeout * 1000)))
        return bool(events.get(self._pair))

    def commands(self, limit: int) -> list[Command]:
        if self._io.failed:
            raise LinkClosedError("the link thread failed (see its traceback above)")
        out: list[Command] = []
        for _ in range(limit):
            try:
                frames = recv_frames(self._pair, zmq.NOBLOCK)
            except zmq.Again:
                break
            kind = parse_header(frames[0].buffer)[0]
            if kind == Kind.ADD:
                request_id, payload = unpack(frames[1].buffer)
                out.append(Add(str(request_id), payload))
            elif kind == Kind.ABORT:
                out.append(Abort(frames[1].bytes.decode()))
            elif kind == Kind.SHUTDOWN:
                out.append(Shutdown())
            elif kind == LOST:
                raise LinkClosedError(frames[1].bytes.decode())
        return out

    def beat(self, now_ns: int) -> None:
        self._io.last_turn = now_ns / 1e9

    def ready(self) -> None:
        self._post(Kind.READY)

    def failed(self, details: OmniErrorDetails, traceback: str) -> None:
        self._post(Kind.FAILED, [omni_errors.encode(details), traceback.encode("utf-8", "replace")])

    def outputs(self, outputs: Sequence[Output]) -> None:
        self._post(Kind.OUTPUTS, [pack([list(o) for o in outputs])])

    def request_errors(self, frames: Sequence[bytes]) -> None:
        self._post(Kind.REQUEST_ERROR, [b"".join(frames)])  # one part: decode_many on the other side

    def fatal(self, details: OmniErrorDetails, code: ExitCode) -> None:
        self._post(Kind.FATAL, [omni_errors.encode(details)], int(code))

    def close(self, code: int) -> None:
        if self._closed:
            return
        self._closed = True
        for kind, c in ((Kind.BYE, code), (CLOSE, 0)):
            try:
                self._pair.send_multipart([header(kind, 0, c)], zmq.NOBLOCK)
            except zmq.ZMQError:
                break
        if self._io.is_alive():
            self._io.join(self._cfg.linger + 2.0)
        self._pair.close(0)
        self._ctx.destroy(0)

    def _post(self, kind: int, parts: Sequence[bytes] = (), code: int = 0) -> None:
        try:
            frames = [header(kind, 0, code), *parts]
            self._pair.send_multipart(frames, copy=False)  # omni-errors: ignore[OE303]: SNDTIMEO is set
        except zmq.Again as exc:
            raise LinkClosedError("the link thread stopped taking messages") from exc


def run_remote_stage(stage_id: int, name: str, engine: str, cfg: StageConnectConfig) -> int:
    """Join the server at `cfg.endpoint` as stage `stage_id` and serve until told to stop.

    `engine` is "module:Name", chosen here (the server sends only the engine's plain-data
    arguments). Returns the exit code: 82 when the stage cannot join."""
    try:
        # Import first, join after: loading a native library (libtorch: seconds) holds the GIL, and
        # the link thread could not answer heartbeats meanwhile. A failure here is reported over
        # the link when the engine is built, so the server still learns the root cause.
        StageSpec(engine).resolve()
    except Exception:  # omni-errors: ignore[OE202]: logged; the stage joins and reports it as FAILED
        logger.exception("stage %d (%s): importing %s failed", stage_id, name, engine)
    hello = Hello(
        stage_id=stage_id,
        name=name,
        session=secrets.token_hex(8),
        frame_version=(omni_errors.FRAME_MAJOR, omni_errors.FRAME_MINOR),
        host=socket.gethostname(),
        pid=os.getpid(),
    )
    try:
        link, welcome = ZmqWorkerLink.join(cfg, hello)
    except StageJoinError as exc:
        logger.critical("stage %d (%s) could not join %s: %s", stage_id, name, cfg.endpoint, exc)
        return int(ExitCode.STARTUP_FAILURE)
    logger.info("stage %d (%s) joined %s (session %s)", stage_id, name, cfg.endpoint, hello.session[:8])
    spec = StageSpec(engine, welcome.kwargs, name=name)
    config = WorkerConfig(heartbeat_interval=welcome.loop_interval, shutdown_timeout=welcome.shutdown_timeout)
    return serve_stage(stage_id, spec, link, config)
