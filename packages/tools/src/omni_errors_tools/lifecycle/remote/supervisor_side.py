"""The supervisor's side of the remote link: one ROUTER socket for every remote stage.

`LinkServer` listens (a CURVE server behind the ZAP allow-list of stage keys,
`omni_errors.security.curve`: a peer whose key is not allowed never completes the handshake, so
not one of its frames reaches this socket) and hands each message to the `session.RemoteStageLink` whose session
it belongs to. The socket is read on the asyncio loop in bounded batches, so a flood cannot
starve the HTTP server or the watchdog. Sends never block: at the high-water mark, or while the
stage's connection is down, `add` raises LinkRefusedError (the request gets 503). docs/remote.md
describes the sessions and deadlines.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import omni_errors
import zmq
from omni_errors.security.curve import AllowList, as_server
from omni_errors_tools.lifecycle.channels import Kind
from omni_errors_tools.lifecycle.engine import RemoteStageSpec
from omni_errors_tools.lifecycle.links import Refusal
from omni_errors_tools.lifecycle.remote.config import LinkConfig, LinkConfigError, endpoint_host
from omni_errors_tools.lifecycle.remote.messages import (
    LINK_MAJOR,
    Hello,
    ProtocolError,
    header,
    pack,
    parse_header,
    recv_frames,
)
from omni_errors_tools.lifecycle.remote.session import RemoteStageLink
from omni_errors_tools.lifecycle.supervisor_types import LifecycleConfig

__all__ = ["LinkServer", "LinkStats"]

logger = logging.getLogger(__name__)

_BATCH = 256  # messages read per loop callback before yielding to the other callbacks
_ZAP_DOMAIN = "omni-errors"


@dataclass
class LinkStats:
    """What the link's socket saw. `received` counts every message the ROUTER socket delivered,
    from anyone, and `by_key` the same messages by the sender's authenticated key (libzmq's
    User-Id, set by the ZAP handler): a peer refused by the allow-list appears in neither."""

    received: int = 0
    by_key: collections.Counter[str] = field(default_factory=collections.Counter)
    unregistered: int = 0  # from peers that never joined (dropped)
    refused: int = 0  # HELLOs refused (unknown stage, taken, version)
    auth_allowed: int = 0  # CURVE handshakes the allow-list accepted
    auth_denied: int = 0  # ... and refused

    def as_dict(self) -> dict[str, Any]:
        return {**self.__dict__, "by_key": dict(self.by_key)}


class LinkServer:
    """Listens for remote stages; owns the ZMQ context, the authenticator and the ROUTER socket."""

    def __init__(self, config: LinkConfig, lifecycle: LifecycleConfig) -> None:
        self.config = config
        self.lifecycle = lifecycle
        self.stats = LinkStats()
        self._expected: dict[int, RemoteStageLink] = {}
        self._by_routing: dict[bytes, RemoteStageLink] = {}
        self._ctx: zmq.Context[Any] | None = None
        self._auth: Any = None  # the ZAP handler (zmq.auth's ThreadAuthenticator), with CURVE
        self._sock: zmq.Socket[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain_scheduled = False

    def start(self) -> None:
        """Bind the socket (on the running loop). Raises LinkConfigError with what went wrong."""
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        ctx = self._ctx = zmq.Context()
        sock = self._sock = ctx.socket(zmq.ROUTER)
        sock.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a full or vanished peer is an error, never a silent drop
        sock.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a reconnecting stage takes its session's identity back
        sock.setsockopt(zmq.SNDHWM, cfg.hwm)
        sock.setsockopt(zmq.RCVHWM, cfg.hwm)
        sock.setsockopt(zmq.MAXMSGSIZE, cfg.max_message)
        sock.setsockopt(zmq.LINGER, int(cfg.linger * 1000))
        host, _ = endpoint_host(cfg.endpoint)
        sock.setsockopt(zmq.IPV6, int(":" in host))
        curve = cfg.curve_keys()
        if curve is not None:
            self._auth = AllowList(curve.allowed, logger, self._count_auth).start(ctx, domain=_ZAP_DOMAIN)
            as_server(sock, curve, domain=_ZAP_DOMAIN)
        if cfg.listen_fd is not None:
            sock.setsockopt(zmq.USE_FD, cfg.listen_fd)  # libzmq owns the socket from now on
        try:
            sock.bind(cfg.endpoint)
        except zmq.ZMQError as exc:
            self.close()
            raise LinkConfigError(f"cannot listen for remote stages on {cfg.endpoint}: {exc}") from None
        self._loop.add_reader(sock.FD, self.drain)
        mode = "plaintext (loopback only)" if cfg.plaintext else "CURVE, allow-list of stage keys"
        logger.info("listening for remote stages on %s (%s)", cfg.endpoint, mode)

    def _count_auth(self, allowed: bool) -> None:
        if allowed:
            self.stats.auth_allowed += 1
        else:
            self.stats.auth_denied += 1

    def expect(self, stage_id: int, spec: RemoteStageSpec) -> RemoteStageLink:
        link = RemoteStageLink(self, stage_id, spec)
        self._expected[stage_id] = link
        return link

    def close(self) -> None:
        """Stop listening; idempotent."""
        for link in self._expected.values():
            link.close()
        if self._sock is not None:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._sock.FD)
            self._sock.close()
            self._sock = None
        if self._auth is not None:
            self._auth.stop()
            self._auth = None
        if self._ctx is not None:
            self._ctx.term()
            self._ctx = None

    # -- sending ----------------------------------------------------------------------------

    def send(self, routing: bytes, frames: Sequence[bytes]) -> Refusal | None:
        """Queue one message for `routing`: None once queued, else why not."""
        sock = self._sock
        if sock is None:
            return Refusal.UNREACHABLE
        try:
            sock.send_multipart([routing, *frames], zmq.NOBLOCK)
        except zmq.Again:
            return Refusal.FULL
        except zmq.ZMQError as exc:
            if exc.errno != zmq.EHOSTUNREACH:
                raise
            return Refusal.UNREACHABLE  # not connected right now (it may reconnect within its deadline)
        finally:
            self._after_io()
        return None

    def forget(self, routing: bytes) -> None:
        self._by_routing.pop(routing, None)

    # -- receiving --------------------------------------------------------------------------

    def _after_io(self) -> None:
        # The ZMQ fd is edge-triggered and any socket call may consume its edge: look again.
        sock = self._sock
        if sock is not None and not self._drain_scheduled and int(sock.getsockopt(zmq.EVENTS)) & zmq.POLLIN:
            self._drain_scheduled = True
            assert self._loop is not None
            self._loop.call_soon(self.drain)

    def drain(self) -> None:
        """Read what is waiting (bounded); the loop calls this whenever the socket is readable."""
        self._drain_scheduled = False
        sock = self._sock
        if sock is None:
            return
        for _ in range(_BATCH):
            try:
                frames = recv_frames(sock, zmq.NOBLOCK)
            except zmq.Again:
                return
            self.stats.received += 1
            self.stats.by_key[self._sender(frames[-1])] += 1
            try:
                self._dispatch(frames)
            except Exception:  # omni-errors: ignore[OE202]: a defect here must not leave the socket unread
                logger.exception("link: failed to handle a message")
            if self._sock is None:  # a callback closed the server (the pipeline died)
                return
        self._drain_scheduled = True
        assert self._loop is not None
        self._loop.call_soon(self.drain)  # more may be waiting: let the other callbacks run first

    def _sender(self, frame: zmq.Frame) -> str:
        """The Z85 key the message's connection authenticated with ("plaintext" without CURVE)."""
        if self.config.plaintext:
            return "plaintext"
        return str(frame.get("User-Id"))

    def _dispatch(self, frames: list[zmq.Frame]) -> None:
        routing = frames[0].bytes
        link = self._by_routing.get(routing)
        try:
            if len(frames) < 2:
                raise ProtocolError(f"message of {len(frames)} frames has no header")
            kind, code, seq = parse_header(frames[1].buffer)
        except ProtocolError as exc:
            if link is None:
                self.stats.unregistered += 1
            else:
                link.broken(str(exc))
            return
        if link is not None:
            link.receive(kind, code, seq, frames[2:])
        elif kind == Kind.HELLO and len(frames) == 3:
            self._hello(routing, frames[2])
        else:
            self.stats.unregistered += 1

    def _hello(self, routing: bytes, body: zmq.Frame) -> None:
        try:
            hello = Hello.decode(body.buffer)
        except ProtocolError as exc:
            self._refuse(routing, None, f"malformed HELLO ({exc})")
            return
        link = self._expected.get(hello.stage_id)
        if hello.link_version[0] != LINK_MAJOR:
            reason = f"link protocol {hello.link_version[0]}.x is not supported (this server speaks {LINK_MAJOR}.x)"
        elif hello.frame_version[0] != omni_errors.FRAME_MAJOR:
            reason = f"error frame {hello.frame_version[0]}.x is not readable here ({omni_errors.FRAME_MAJOR}.x)"
        elif link is None:
            reason = f"this server expects no remote stage {hello.stage_id} (remote: {sorted(self._expected)})"
        elif link.name != hello.name:
            reason = f"stage {hello.stage_id} is {link.name!r} here, not {hello.name!r}"
        elif not link.waiting:
            reason = f"stage {hello.stage_id} is already served ({link.where})"
        else:
            self._by_routing[routing] = link
            link.join(routing, hello)
            return
        self._refuse(routing, hello, reason)

    def _refuse(self, routing: bytes, hello: Hello | None, reason: str) -> None:
        self.stats.refused += 1
        who = f"{hello.host} pid {hello.pid}" if hello else "a peer"
        logger.warning("link: refused %s: %s", who, reason)
        body = pack({"reason": reason})
        self.send(routing, [header(Kind.REFUSED), body])  # omni-errors: ignore[OE303]: send is NOBLOCK
