"""The stage's side of the remote link: a DEALER socket owned by one I/O thread.

The worker loop runs in the main thread and may spend seconds inside one engine step. The I/O
thread keeps the link honest meanwhile: it sends a heartbeat every interval (with the age of the
loop's last turn, for the supervisor's hang detector), reads everything the supervisor sends so
that its heartbeats are never stuck behind requests, numbers and checks every message, and
watches the supervisor's deadline. When the supervisor is gone (deadline, gap, or SHUTDOWN) the
main thread gets `shutdown_timeout + stop_timeout` to exit; a main thread stuck in a kernel past
that is ended by the I/O thread (`os._exit(BROKEN_IPC)`), as a local stage would be SIGKILLed by
its supervisor: on a remote host nobody else can. The threads talk over an inproc PAIR socket.
"""

from __future__ import annotations

import collections
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any

import zmq
from zmq.utils.monitor import recv_monitor_message

import omni_errors
from omni_errors import OmniErrorDetails
from omni_errors.errors import OmniErrorsError
from omni_errors.lifecycle.channels import Kind
from omni_errors.lifecycle.engine import StageSpec
from omni_errors.lifecycle.exitcodes import ExitCode
from omni_errors.lifecycle.links import Abort, Add, Command, LinkClosedError, Output, Shutdown
from omni_errors.lifecycle.remote.config import StageConnectConfig, endpoint_host
from omni_errors.lifecycle.remote.protocol import (
    CLOSE,
    LOST,
    STAGE_BEAT,
    SUPERVISOR_BEAT,
    Hello,
    ProtocolError,
    SeqCheck,
    Welcome,
    header,
    pack,
    parse_header,
    recv_frames,
    unpack,
)
from omni_errors.lifecycle.worker import WorkerConfig, serve_stage

__all__ = ["StageJoinError", "ZmqWorkerLink", "run_remote_stage"]

logger = logging.getLogger("omni_errors.lifecycle.remote")

_BATCH = 256
_MONITOR = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_DISCONNECTED
)


class StageJoinError(OmniErrorsError):
    """The stage could not join its server: refused, not authenticated, or no answer in time."""


class _IoThread(threading.Thread):
    def __init__(
        self,
        ctx: zmq.Context[Any],
        cfg: StageConnectConfig,
        curve: tuple[bytes, bytes, bytes] | None,
        hello: Hello,
        inproc: str,
    ) -> None:
        super().__init__(name=f"omni-link-stage-{hello.stage_id}", daemon=True)
        self.last_turn = time.monotonic()  # written by the main thread at every loop turn
        self._ctx, self._cfg, self._curve, self._hello, self._inproc = ctx, cfg, curve, hello, inproc
        self._welcome: Welcome | None = None
        self._recv = SeqCheck()
        self._seq = 0
        self._out: collections.deque[list[Any]] = collections.deque()  # to the server, numbered
        self._to_main: collections.deque[list[Any]] = collections.deque()  # waiting for room in the pair
        self._heard = 0.0
        self._echo = 0.0
        self._next_beat = 0.0
        self._lost = False
        self._closing = False
        self._close_by = 0.0
        self._kill_at: float | None = None
        self.failed = False
        self.handshake_failures = 0  # read by the main thread for its timeout message

    def run(self) -> None:
        try:
            self._run()
        except Exception:  # the link must end visibly, never silently: the main thread checks `failed`
            self.failed = True
            logger.exception("stage %d: link thread failed", self._hello.stage_id)

    def _sockets(self) -> tuple[zmq.Socket[Any], zmq.Socket[Any], zmq.Socket[Any]]:
        cfg, ctx = self._cfg, self._ctx
        dealer = ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.ROUTING_ID, f"stage-{self._hello.stage_id}-{self._hello.session}".encode())
        dealer.setsockopt(zmq.SNDHWM, cfg.hwm)
        dealer.setsockopt(zmq.RCVHWM, cfg.hwm)
        dealer.setsockopt(zmq.MAXMSGSIZE, cfg.max_message)
        dealer.setsockopt(zmq.LINGER, int(cfg.linger * 1000))
        dealer.setsockopt(zmq.RECONNECT_IVL, 100)
        dealer.setsockopt(zmq.RECONNECT_IVL_MAX, 500)
        dealer.setsockopt(zmq.IPV6, int(":" in endpoint_host(cfg.endpoint)[0]))
        if self._curve is not None:
            server, public, secret = self._curve
            dealer.setsockopt(zmq.CURVE_SERVERKEY, server)
            dealer.setsockopt(zmq.CURVE_PUBLICKEY, public)
            dealer.setsockopt(zmq.CURVE_SECRETKEY, secret)
        monitor = dealer.get_monitor_socket(_MONITOR)
        pair = ctx.socket(zmq.PAIR)
        pair.connect(self._inproc)
        dealer.connect(cfg.endpoint)
        return dealer, pair, monitor

    def _run(self) -> None:
        dealer, pair, monitor = self._sockets()
        self._queue([header(Kind.HELLO), self._hello.encode()])
        poller = zmq.Poller()
        poller.register(monitor, zmq.POLLIN)
        flags: dict[zmq.Socket[Any], int] = {}
        try:
            while True:
                now = time.monotonic()
                full = len(self._out) >= self._cfg.hwm
                # Stop reading the main thread at the high-water mark (backpressure), unless the
                # link is gone: then read and drop, so the main thread never blocks on a send.
                for sock, want in (
                    (dealer, zmq.POLLIN | (zmq.POLLOUT if self._out else 0)),
                    (pair, zmq.POLLIN if self._lost or not full else 0),
                ):
                    if flags.get(sock) != want:
                        poller.register(sock, want)
                        flags[sock] = want
                events = dict(poller.poll(self._wait_ms(now, full)))
                now = time.monotonic()
                if events.get(monitor):
                    self._on_monitor(recv_monitor_message(monitor))
                if events.get(dealer, 0) & zmq.POLLIN:
                    self._drain(dealer, now, self._from_server)
                if events.get(pair):
                    self._drain(pair, now, self._from_main)
                self._tick(now)
                self._flush(dealer, pair)
                if self._closing and (not self._out or self._lost or now > self._close_by):
                    return
        finally:
            dealer.close()  # lingers up to cfg.linger for what is still queued (the FATAL, the BYE)
            monitor.close(0)
            pair.close(0)

    def _wait_ms(self, now: float, full: bool) -> int:
        """Sleep until the next heartbeat is due (an idle link wakes 4 times a second, not more)."""
        if self._welcome is None:
            wait = 0.1  # joining: watch for the WELCOME and for handshake failures
        elif self._to_main or self._closing:
            wait = 0.01  # the main thread has not taken everything yet / the last messages are leaving
        elif full or self._lost:
            wait = 0.25  # a heartbeat could not be queued anyway; POLLOUT wakes us when it can
        else:
            wait = self._next_beat - now
        return max(1, int(min(wait, 0.25) * 1000))

    def _drain(self, sock: zmq.Socket[Any], now: float, handle: Any) -> None:
        for _ in range(_BATCH):
            try:
                frames = recv_frames(sock, zmq.NOBLOCK)
            except zmq.Again:
                return
            handle(frames, now)

    def _queue(self, frames: list[Any]) -> None:
        kind, code, _ = parse_header(frames[0])
        frames[0] = header(kind, self._seq, code)
        self._seq += 1
        self._out.append(frames)

    def _flush(self, dealer: zmq.Socket[Any], pair: zmq.Socket[Any]) -> None:
        for queue, sock in ((self._out, dealer), (self._to_main, pair)):
            while queue:
                try:
                    sock.send_multipart(queue[0], zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                queue.popleft()

    def _post(self, frames: list[Any]) -> None:
        self._to_main.append(frames)

    def _tick(self, now: float) -> None:
        welcome = self._welcome
        if welcome is None or self._lost:
            pass
        elif now - self._heard > welcome.timeout:
            self._lose(f"nothing heard from the server for {now - self._heard:.2f}s", now)
        elif now >= self._next_beat and len(self._out) < self._cfg.hwm:
            self._queue([header(Kind.HEARTBEAT), STAGE_BEAT.pack(max(0.0, now - self.last_turn), self._echo)])
            self._next_beat = now + welcome.heartbeat_interval
        if self._kill_at is not None and now > self._kill_at and not self._closing:
            logger.critical(
                "stage %d: the stage loop did not stop after its supervisor left; exiting with code %d",
                self._hello.stage_id,
                int(ExitCode.BROKEN_IPC),
            )
            os._exit(int(ExitCode.BROKEN_IPC))  # the main thread is stuck in native code: nothing else ends it

    def _lose(self, reason: str, now: float) -> None:
        if self._lost:
            return
        self._lost = True
        self._out.clear()
        self._post([header(LOST), reason.encode()])
        if self._welcome is not None:
            self._kill_at = now + self._welcome.shutdown_timeout + self._welcome.stop_timeout

    def _from_main(self, frames: list[zmq.Frame], now: float) -> None:
        kind = parse_header(frames[0].buffer)[0]
        if kind == CLOSE:
            self._closing = True
            self._close_by = now + self._cfg.linger
        elif not self._lost:
            self._queue([frames[0].bytes, *frames[1:]])

    def _from_server(self, frames: list[zmq.Frame], now: float) -> None:
        try:
            kind, _, seq = parse_header(frames[0].buffer)
            if self._welcome is None:
                self._before_welcome(kind, seq, frames, now)
                return
            self._recv.accept(seq)
        except ProtocolError as exc:
            self._lose(f"the link broke: {exc}", now)
            return
        self._heard = now
        if kind == Kind.HEARTBEAT:
            (self._echo,) = SUPERVISOR_BEAT.unpack(frames[1].buffer)
        elif kind in (Kind.ADD, Kind.ABORT, Kind.SHUTDOWN) and not self._lost:
            self._post(frames)
            if kind == Kind.SHUTDOWN and self._welcome is not None and self._kill_at is None:
                self._kill_at = now + self._welcome.shutdown_timeout + self._welcome.stop_timeout

    def _before_welcome(self, kind: int, seq: int, frames: list[zmq.Frame], now: float) -> None:
        if kind == Kind.WELCOME:
            self._recv.accept(seq)
            self._welcome = Welcome.decode(frames[1].buffer)
            self._heard, self._next_beat = now, now
            self._post([header(Kind.WELCOME), frames[1]])
        elif kind == Kind.REFUSED:
            body = unpack(frames[1].buffer)
            reason = body.get("reason", "no reason given") if isinstance(body, dict) else "no reason given"
            self._lose(f"the server refused this stage: {reason}", now)

    def _on_monitor(self, event: Any) -> None:
        kind, value = event["event"], event["value"]
        endpoint = self._cfg.endpoint
        if kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.handshake_failures = 0
            if self._welcome is not None:
                logger.info("stage %d: link to %s reconnected", self._hello.stage_id, endpoint)
        elif kind == zmq.EVENT_DISCONNECTED and self._welcome is not None and not self._lost:
            logger.warning("stage %d: link to %s dropped; reconnecting", self._hello.stage_id, endpoint)
        elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH and self._welcome is None:
            self._lose(f"the server at {endpoint} refused this stage's key (ZAP status {value})", time.monotonic())
        elif kind in (zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL, zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL):
            # A wrong server key and a server (or relay) that closes the connection look the same
            # here, and the second may pass: count them for the timeout's message, keep trying.
            self.handshake_failures += 1


class ZmqWorkerLink:
    """The stage's end of a remote link (a `links.WorkerLink`); made by `join`."""

    def __init__(self, ctx: zmq.Context[Any], pair: zmq.Socket[Any], io: _IoThread, cfg: StageConnectConfig) -> None:
        self._ctx, self._pair, self._io, self._cfg = ctx, pair, io, cfg
        self._poller = zmq.Poller()
        self._poller.register(pair, zmq.POLLIN)
        self._wake_fd: int | None = None
        self._closed = False

    @classmethod
    def join(cls, cfg: StageConnectConfig, hello: Hello) -> tuple[ZmqWorkerLink, Welcome]:
        """Connect, say HELLO and wait for WELCOME (`cfg.connect_timeout`). Raises StageJoinError,
        or KeyFileError before connecting when a key file is wrong."""
        curve = cfg.load_keys()
        ctx: zmq.Context[Any] = zmq.Context()
        pair = ctx.socket(zmq.PAIR)
        inproc = f"inproc://omni-link-{secrets.token_hex(4)}"
        pair.bind(inproc)
        pair.setsockopt(zmq.SNDTIMEO, int((cfg.connect_timeout + cfg.linger) * 1000))
        io = _IoThread(ctx, cfg, curve, hello, inproc)
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
            self._pair.send_multipart([header(kind, 0, code), *parts], copy=False)
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
    except Exception:
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
