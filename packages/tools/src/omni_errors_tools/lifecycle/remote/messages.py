"""The link's messages on the wire (docs/remote.md has the table).

A message is one ZMQ multipart message: a 10-byte header frame (kind u8, code u8, seq u64 LE),
then its parts. Error frames travel as parts of their own, exactly as `omni_errors.encode` wrote
them, so the receiver decodes each one straight from its `zmq.Frame` buffer. Everything else that
has structure is msgpack, never pickle: a peer's bytes are data, not code.

Sequence numbers count each direction's messages from 0 (HELLO, WELCOME). The receiver accepts
only the next one: a gap means the link lost a message (a connection dropped with data in it),
and the session ends instead of guessing which request it was; nothing is ever replayed.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack
import zmq

__all__ = [
    "HEADER",
    "LINK_MAJOR",
    "LINK_MINOR",
    "STAGE_BEAT",
    "SUPERVISOR_BEAT",
    "Hello",
    "ProtocolError",
    "SeqCheck",
    "Welcome",
    "header",
    "pack",
    "parse_header",
    "recv_frames",
    "unpack",
]

#: The link protocol's version: a major change is refused at HELLO; minors only add message kinds
#: (a reader ignores kinds it does not know, after counting their sequence number).
LINK_MAJOR = 1
LINK_MINOR = 0

HEADER = struct.Struct("<BBQ")
#: HEARTBEAT bodies. The supervisor's: its send time (its monotonic clock), which the stage echoes
#: unchanged. The stage's: the age of its loop's last turn, and the newest send time it received.
SUPERVISOR_BEAT = struct.Struct("<d")
STAGE_BEAT = struct.Struct("<dd")
#: A kind that never crosses the wire: the stage's I/O thread tells its main thread the link ended.
LOST = 255
#: Same, main thread to I/O thread: flush what is queued, then stop.
CLOSE = 254


class ProtocolError(ValueError):
    """A message that does not follow this protocol."""


def header(kind: int, seq: int = 0, code: int = 0) -> bytes:
    return HEADER.pack(kind, code, seq)


def parse_header(buf: memoryview | bytes) -> tuple[int, int, int]:
    """(kind, code, seq) of a header frame."""
    if len(buf) != HEADER.size:
        raise ProtocolError(f"header frame of {len(buf)} bytes; expected {HEADER.size}")
    kind, code, seq = HEADER.unpack(buf)
    return kind, code, seq


def recv_frames(sock: zmq.Socket[Any], flags: int = 0) -> list[zmq.Frame]:
    """One multipart message, each part a `zmq.Frame` (no copy). pyzmq's `recv_multipart` asks
    `getsockopt(RCVMORE)` through its Python option enum for every part, several microseconds
    each; a Frame already knows whether more follow."""
    frame = sock.recv(flags, copy=False)  # omni-errors: ignore[OE303]: callers pass NOBLOCK or poll first
    frames = [frame]
    while frame.more:
        frame = sock.recv(copy=False)  # omni-errors: ignore[OE303]: the other parts arrived with the first
        frames.append(frame)
    return frames


def pack(obj: Any) -> bytes:
    """msgpack, bytes kept as bytes; TypeError for what msgpack cannot carry."""
    data: bytes = msgpack.packb(obj, use_bin_type=True)
    return data


def unpack(buf: memoryview | bytes) -> Any:
    """The msgpack body of a message (its size is bounded by the socket's ZMQ_MAXMSGSIZE)."""
    try:
        return msgpack.unpackb(buf, raw=False)
    except (ValueError, msgpack.ExtraData, msgpack.FormatError, msgpack.StackError) as exc:
        raise ProtocolError(f"malformed msgpack body: {exc}") from None


@dataclass(frozen=True)
class Hello:
    """Stage -> supervisor, first message: who it is and which versions it writes."""

    stage_id: int
    name: str
    session: str  # random, chosen by the stage process: a restarted process is a new session
    link_version: tuple[int, int] = (LINK_MAJOR, LINK_MINOR)
    frame_version: tuple[int, int] = (1, 0)
    host: str = ""
    pid: int = 0

    def encode(self) -> bytes:
        return pack(
            {
                "link": list(self.link_version),
                "frame": list(self.frame_version),
                "stage": self.stage_id,
                "name": self.name,
                "session": self.session,
                "host": self.host,
                "pid": self.pid,
            }
        )

    @classmethod
    def decode(cls, buf: memoryview | bytes) -> Hello:
        d = _mapping(unpack(buf), "HELLO")
        try:
            return cls(
                stage_id=int(d["stage"]),
                name=str(d["name"]),
                session=str(d["session"]),
                link_version=_version(d["link"]),
                frame_version=_version(d["frame"]),
                host=str(d.get("host", ""))[:255],
                pid=int(d.get("pid", 0)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed HELLO: {exc!r}") from None


@dataclass(frozen=True)
class Welcome:
    """Supervisor -> stage: the session is open. The engine's arguments and every deadline the
    stage needs come from the supervisor, so both hosts run one configuration."""

    session: str
    kwargs: dict[str, Any]
    heartbeat_interval: float
    timeout: float
    loop_interval: float  # the stage loop's longest idle wait (LifecycleConfig.heartbeat_interval)
    shutdown_timeout: float
    stop_timeout: float

    def encode(self) -> bytes:
        return pack(
            {
                "link": [LINK_MAJOR, LINK_MINOR],
                "session": self.session,
                "kwargs": self.kwargs,
                "heartbeat": self.heartbeat_interval,
                "timeout": self.timeout,
                "loop": self.loop_interval,
                "shutdown": self.shutdown_timeout,
                "stop": self.stop_timeout,
            }
        )

    @classmethod
    def decode(cls, buf: memoryview | bytes) -> Welcome:
        d = _mapping(unpack(buf), "WELCOME")
        try:
            return cls(
                session=str(d["session"]),
                kwargs=dict(d["kwargs"]),
                heartbeat_interval=float(d["heartbeat"]),
                timeout=float(d["timeout"]),
                loop_interval=float(d["loop"]),
                shutdown_timeout=float(d["shutdown"]),
                stop_timeout=float(d["stop"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed WELCOME: {exc!r}") from None


def _mapping(obj: Any, what: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise ProtocolError(f"{what} body is a {type(obj).__name__}, not a map")
    return obj


def _version(obj: Any) -> tuple[int, int]:
    if not isinstance(obj, Sequence) or len(obj) != 2:
        why = f"version {obj!r} is not [major, minor]"
        raise ValueError(why)  # omni-errors: ignore[OE101]: the decoder raises ProtocolError from it
    return int(obj[0]), int(obj[1])


class SeqCheck:
    """The receiving end of one direction: accepts exactly the next sequence number."""

    def __init__(self) -> None:
        self.expected = 0

    def accept(self, seq: int) -> None:
        if seq != self.expected:
            what = "repeated" if seq < self.expected else f"{seq - self.expected} missing"
            raise ProtocolError(f"message {seq} arrived where {self.expected} was due ({what})")
        self.expected += 1
