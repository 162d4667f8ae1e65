"""One remote stage's session, as the supervisor sees it: `RemoteStageLink`, a `links.StageLink`.

`supervisor_side.LinkServer` owns the socket and hands this session every message whose routing
id is its stage's; the session checks the sequence numbers, answers to the supervisor
(`LinkListener`), sends heartbeats and ends itself at its deadline (docs/remote.md: sessions and
deadlines). It reaches the socket only through `SessionTransport`, so it runs without one in tests.
"""

from __future__ import annotations

import collections
import enum
import logging
import struct
import time
from collections.abc import Sequence
from typing import Any, Protocol

import omni_errors
import zmq
from omni_errors.fatal.exitcodes import ExitCode, stage_exit_code
from omni_errors_tools.lifecycle.channels import Kind
from omni_errors_tools.lifecycle.engine import RemoteStageSpec
from omni_errors_tools.lifecycle.links import LinkListener, LinkPayloadError, LinkRefusedError, Refusal
from omni_errors_tools.lifecycle.remote.config import LinkConfig
from omni_errors_tools.lifecycle.remote.messages import (
    STAGE_BEAT,
    SUPERVISOR_BEAT,
    Hello,
    ProtocolError,
    SeqCheck,
    Welcome,
    header,
    pack,
    unpack,
)
from omni_errors_tools.lifecycle.supervisor_types import LifecycleConfig

__all__ = ["RemoteStageLink", "SessionStatus", "SessionTransport"]

logger = logging.getLogger(__name__)


class SessionStatus(enum.Enum):
    WAITING = "waiting"  # expected; no stage has joined yet
    JOINED = "joined"  # a stage said HELLO and was welcomed
    ENDED = "ended"  # over (the stage left, was lost or abandoned); a session never restarts


class SessionTransport(Protocol):
    """What a session needs from the socket that carries it (`supervisor_side.LinkServer`)."""

    @property
    def config(self) -> LinkConfig: ...

    @property
    def lifecycle(self) -> LifecycleConfig: ...

    def send(self, routing: bytes, frames: Sequence[bytes]) -> Refusal | None:
        """Queue one message without blocking: None once queued, else why not."""

    def drain(self) -> None:
        """Read what has arrived now (it reaches the sessions through `receive`)."""

    def forget(self, routing: bytes) -> None:
        """Route nothing more to this routing id."""


class RemoteStageLink:
    """One remote stage's session, as the supervisor sees it (a `links.StageLink`)."""

    def __init__(self, server: SessionTransport, stage_id: int, spec: RemoteStageSpec) -> None:
        self.stage_id = stage_id
        self.name = spec.name
        self._spec = spec
        self._server = server
        self._cfg = server.config
        self._listener: LinkListener | None = None
        self._status = SessionStatus.WAITING
        self._routing = b""
        self._hello: Hello | None = None
        self._recv = SeqCheck()
        self._send_seq = 0
        self._heard = 0.0  # time.monotonic() of the last message from the stage
        # Send times of our heartbeats the stage has not echoed yet (sent or not: a heartbeat we could
        # not send is owed all the same). The oldest one's age is the link's round-trip age: a loop
        # that stalled here (a long import holding the GIL) sent nothing, so it owes nothing.
        self._unanswered: collections.deque[float] = collections.deque()
        self._beat_sent = 0.0
        self._beat_age = 0.0  # the age of the stage loop's last turn, as its last heartbeat said
        self._beat_at: float | None = None
        self._ready = False  # READY seen: the short deadline applies from now on
        self._reported = False

    @property
    def where(self) -> str:
        h = self._hello
        return f"remote {h.host} pid {h.pid}, session {h.session[:8]}" if h else "remote, not joined"

    @property
    def pid(self) -> int | None:
        return None

    @property
    def status(self) -> SessionStatus:
        return self._status

    @property
    def waiting(self) -> bool:
        return self._status is SessionStatus.WAITING

    @property
    def alive(self) -> bool:
        return self._status is SessionStatus.JOINED

    async def open(self, listener: LinkListener) -> None:
        self._listener = listener  # the server is listening already; the stage joins when it connects

    def join(self, routing: bytes, hello: Hello) -> None:
        self._routing, self._hello, self._status = routing, hello, SessionStatus.JOINED
        self._recv.accept(0)  # the HELLO
        self._heard = self._beat_sent = time.monotonic()
        lc = self._server.lifecycle
        welcome = Welcome(
            session=hello.session,
            kwargs=dict(self._spec.kwargs),
            heartbeat_interval=self._cfg.heartbeat_interval,
            timeout=self._cfg.stage_timeout,
            loop_interval=lc.heartbeat_interval,
            shutdown_timeout=lc.shutdown_timeout,
            stop_timeout=lc.stop_timeout,
        )
        logger.info(
            "stage %d (%s) joined from %s pid %d (session %s, link %d.%d, frames %d.%d)",
            self.stage_id,
            self.name,
            hello.host,
            hello.pid,
            hello.session[:8],
            *hello.link_version,
            *hello.frame_version,
        )
        self._send(Kind.WELCOME, [welcome.encode()])

    # -- requests ---------------------------------------------------------------------------

    def add(self, request_id: str, payload: Any) -> None:
        try:
            body = pack([request_id, payload])
        except (TypeError, ValueError) as exc:
            raise LinkPayloadError(f"a payload for remote stage {self.stage_id} is not msgpack data: {exc}") from None
        refused = self._send(Kind.ADD, [body])
        if refused is Refusal.FULL:
            raise LinkRefusedError(refused, f"the link to stage {self.stage_id} holds {self._cfg.hwm} unsent messages")
        if refused is not None:
            if self._status is SessionStatus.JOINED:
                # A stage that has just left may have said why (its FATAL is queued unread): read
                # it first, so the request is answered with the stage's record, not this refusal.
                self._server.drain()
            raise LinkRefusedError(refused, f"remote stage {self.stage_id} is not connected")

    def abort(self, request_id: str) -> None:
        self._send(Kind.ABORT, [request_id.encode()])

    def shutdown(self) -> None:
        self._send(Kind.SHUTDOWN)

    def _send(self, kind: Kind, parts: Sequence[bytes] = ()) -> Refusal | None:
        """None once queued (the sequence number is then spent), else why not."""
        if self._status is not SessionStatus.JOINED:
            return Refusal.UNREACHABLE
        frames = [header(kind, self._send_seq), *parts]
        refused = self._server.send(self._routing, frames)  # omni-errors: ignore[OE303]: it is NOBLOCK
        if refused is None:
            self._send_seq += 1
        return refused

    # -- liveness ---------------------------------------------------------------------------

    def progress_age(self, now: float) -> float:
        return 0.0 if self._beat_at is None else self._beat_age + (now - self._beat_at)

    def poll(self, now: float) -> None:
        if self._status is not SessionStatus.JOINED:
            return
        self._server.drain()  # read what arrived first: a busy loop must not look like a silent stage
        owed = now - self._unanswered[0] if self._unanswered else 0.0
        if self._ready and owed > self._cfg.timeout:
            # The round trip, not mere silence: a link whose backlog or latency exceeds the deadline
            # is as useless as a cut one, and a frozen peer echoes nothing either.
            self._end(
                ExitCode.LINK_LOST,
                f"remote stage {self.stage_id} has not answered a heartbeat for {owed:.2f}s "
                f"(deadline {self._cfg.timeout:g}s)",
            )
            return
        if not self._ready and now - self._heard > self._cfg.join_timeout:
            silent = now - self._heard
            self._end(
                ExitCode.LINK_LOST, f"remote stage {self.stage_id}: nothing heard for {silent:.2f}s while starting"
            )
            return
        if now - self._beat_sent >= self._cfg.heartbeat_interval:
            self._beat_sent = now
            if self._ready:
                self._unanswered.append(now)
            self._send(Kind.HEARTBEAT, [SUPERVISOR_BEAT.pack(now)])

    def terminate(self) -> None:
        self.shutdown()

    def kill(self) -> None:
        """Abandon the session: the stage stops hearing heartbeats and ends itself by its deadline."""
        if self._status is SessionStatus.JOINED:
            logger.error("stage %d (%s): abandoning the session", self.stage_id, self.where)
        self._status = SessionStatus.ENDED
        self._server.forget(self._routing)

    def close(self) -> None:
        self._status = SessionStatus.ENDED
        self._server.forget(self._routing)

    # -- what the stage says ------------------------------------------------------------------

    def receive(self, kind: int, code: int, seq: int, parts: list[zmq.Frame]) -> None:
        if self._status is not SessionStatus.JOINED:
            return
        try:
            self._recv.accept(seq)
            self._heard = time.monotonic()
            self._dispatch(kind, code, parts)
        except (ProtocolError, omni_errors.DecodeError, IndexError, struct.error) as exc:
            self.broken(f"malformed message (kind {kind}, seq {seq}): {exc}")

    def _dispatch(self, kind: int, code: int, parts: list[zmq.Frame]) -> None:
        listener = self._listener
        assert listener is not None
        if kind == Kind.HEARTBEAT:
            self._beat_age, echo = STAGE_BEAT.unpack(parts[0].buffer)
            self._beat_at = self._heard
            while self._unanswered and self._unanswered[0] <= echo:
                self._unanswered.popleft()
        elif kind == Kind.REQUEST_ERROR:
            # One step's error frames back to back in one part, decoded from the zmq.Frame's buffer.
            for details in omni_errors.decode_many(parts[0].buffer):
                listener.on_request_error(self, details)
        elif kind == Kind.OUTPUTS:
            batch = unpack(parts[0].buffer)
            listener.on_outputs(self, [(str(r), p, bool(f)) for r, p, f in batch])
        elif kind == Kind.READY:
            self._ready = True
            # The engine is built: its loop turns from now on, and the round-trip deadline starts now.
            self._beat_age, self._beat_at = 0.0, self._heard
            listener.on_ready(self)
        elif kind == Kind.FAILED:
            traceback = parts[1].bytes.decode("utf-8", "replace")
            listener.on_startup_failed(self, omni_errors.decode(parts[0].buffer), traceback)
        elif kind == Kind.FATAL:
            self._reported = True
            listener.on_fatal(self, omni_errors.decode(parts[0].buffer), stage_exit_code(code))
        elif kind == Kind.BYE:
            self._end(stage_exit_code(code), f"remote stage {self.stage_id} exited (exit code {code})")
        else:
            logger.debug("stage %d: ignoring message kind %d (a newer link minor)", self.stage_id, kind)

    def broken(self, reason: str) -> None:
        logger.critical("stage %d (%s): %s", self.stage_id, self.where, reason)
        self._end(ExitCode.BROKEN_IPC, f"the link of remote stage {self.stage_id} broke: {reason}")

    def _end(self, code: ExitCode, reason: str) -> None:
        self._status = SessionStatus.ENDED
        self._server.forget(self._routing)
        if not self._reported and self._listener is not None:
            self._reported = True
            self._listener.on_lost(self, None, code, reason)
