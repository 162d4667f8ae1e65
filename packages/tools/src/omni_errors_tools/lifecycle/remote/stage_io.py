"""The stage's link I/O thread: owns the DEALER socket to the supervisor, talks to the main
thread over an inproc PAIR socket (`stage_side.ZmqWorkerLink` is the main thread's end).

It sends a heartbeat every interval (with the age of the worker loop's last turn), reads
everything the supervisor sends so that heartbeats are never stuck behind requests, numbers and
checks every message, watches the supervisor's deadline, and ends a process whose main thread
stays stuck past its stop deadline (`os._exit(BROKEN_IPC)`): on a remote host nobody else can.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
from typing import Any

import zmq
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.security.curve import as_client
from omni_errors.security.keys import CurveKeys
from omni_errors_tools.lifecycle.channels import Kind
from omni_errors_tools.lifecycle.remote.config import StageConnectConfig, endpoint_host
from omni_errors_tools.lifecycle.remote.messages import (
    CLOSE,
    LOST,
    STAGE_BEAT,
    SUPERVISOR_BEAT,
    Hello,
    ProtocolError,
    SeqCheck,
    Welcome,
    header,
    parse_header,
    recv_frames,
    unpack,
)
from zmq.utils.monitor import recv_monitor_message

__all__ = ["IoThread"]

logger = logging.getLogger(__name__)

_BATCH = 256
_MONITOR = (
    zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_DISCONNECTED
)


class IoThread(threading.Thread):
    """The link's I/O: one per stage process, started by `ZmqWorkerLink.join`."""

    def __init__(
        self,
        ctx: zmq.Context[Any],
        cfg: StageConnectConfig,
        curve: CurveKeys | None,
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
        except Exception:  # omni-errors: ignore[OE202]: the link ends visibly: the main thread checks `failed`
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
            as_client(dealer, self._curve)
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
            os._exit(int(ExitCode.BROKEN_IPC))  # omni-errors: ignore[OE301]: the main thread is stuck in native code

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
