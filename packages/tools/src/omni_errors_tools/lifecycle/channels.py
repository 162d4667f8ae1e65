"""Channels between the supervisor and its stages: pipes for messages, one shm segment for status.

Messages (requests, outputs, error frames) travel over one pipe in each direction, in the framing
of `multiprocessing.connection.Connection` (a 4-byte big-endian length, then the body), so the
worker uses a plain blocking `Connection` while the supervisor reads and writes the same fds
through asyncio without ever blocking its loop. A closed pipe is how either side learns the other
is gone (EOF / EPIPE), which shared memory alone cannot tell.

One POSIX shared-memory segment per supervisor holds a slot per stage: a heartbeat (the stage's
CLOCK_MONOTONIC at its last loop turn) and the stage's "last words", the fatal error frame written
with `encode_into` before anything else is attempted. The supervisor reads the heartbeat without
any message, and still finds the root cause when the pipe broke or the stage died before the
fatal message got through. `docs/lifecycle.md` gives the measurements behind this split.
"""

from __future__ import annotations

import asyncio
import enum
import os
import secrets
import struct
from collections.abc import Callable
from multiprocessing import shared_memory

import omni_errors
from omni_errors import OmniErrorDetails

__all__ = ["SLOT_SIZE", "FrameReader", "Kind", "StatusBoard", "pack", "pack_failed", "unpack_failed"]


class Kind(enum.IntEnum):
    """First byte of every message body."""

    # worker -> supervisor
    READY = 1
    FAILED = 2  # body: u32 frame length, codec frame, utf-8 traceback (for the logs only)
    OUTPUTS = 3  # body: pickle of [(request_id, payload, finished), ...]
    REQUEST_ERROR = 4  # body: codec frame with request_id set
    FATAL = 5  # body: u8 exit code (an `ExitCode`), then the codec frame (fatal=True, stage_id set)
    # supervisor -> worker
    ADD = 16  # body: pickle of (request_id, payload)
    ABORT = 17  # body: utf-8 request id
    SHUTDOWN = 18  # body: empty
    # remote links only (lifecycle/remote/messages.py gives their bodies)
    HELLO = 32  # stage -> supervisor: who it is, its versions
    WELCOME = 33  # supervisor -> stage: the session is open; the engine's arguments, the deadlines
    REFUSED = 34  # supervisor -> stage: why it cannot join
    HEARTBEAT = 35  # both ways; stage -> supervisor carries the age of its loop's last turn
    BYE = 36  # stage -> supervisor: it is exiting, with its exit code


def pack(kind: Kind, body: bytes = b"") -> bytes:
    return bytes((kind,)) + body


def pack_failed(details: OmniErrorDetails, traceback_text: str) -> bytes:
    frame = omni_errors.encode(details)
    return pack(Kind.FAILED, struct.pack("<I", len(frame)) + frame + traceback_text.encode("utf-8", "replace"))


def unpack_failed(body: memoryview) -> tuple[OmniErrorDetails, str]:
    (n,) = struct.unpack_from("<I", body, 0)
    details = omni_errors.decode(body[4 : 4 + n])
    return details, bytes(body[4 + n :]).decode("utf-8", "replace")


_LEN = struct.Struct("!i")


class FrameReader(asyncio.Protocol):
    """Asyncio protocol that splits a pipe into Connection-framed messages.

    `on_message(kind, body)` gets a memoryview valid only during the call; `on_closed(exc)` runs
    once when the pipe reaches EOF, fails, or carries a malformed length.
    """

    def __init__(
        self,
        on_message: Callable[[int, memoryview], None],
        on_closed: Callable[[BaseException | None], None],
        max_message: int = 1 << 30,
    ) -> None:
        self._on_message = on_message
        self._on_closed = on_closed
        self._max = max_message
        self._buf = bytearray()
        self._closed = False
        self.transport: asyncio.ReadTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        # Parse from an immutable bytes object: views into it can never block a resize.
        if self._buf:
            self._buf += data
            data = bytes(self._buf)
            self._buf.clear()
        view = memoryview(data)
        pos = 0
        try:
            while len(view) - pos >= 4:
                (n,) = _LEN.unpack_from(view, pos)
                if n <= 0 or n > self._max:
                    why = f"message length {n} outside 1..{self._max} at byte {pos}"
                    raise ValueError(why)  # omni-errors: ignore[OE101]: ends the link (close callback)
                if len(view) - pos - 4 < n:
                    break
                self._on_message(view[pos + 4], view[pos + 5 : pos + 4 + n])
                pos += 4 + n
        except Exception as exc:  # omni-errors: ignore[OE202]: the error ends the link through its close callback
            self._close(exc)
            if self.transport is not None:
                self.transport.close()
            return
        if pos < len(data):
            self._buf += view[pos:]

    def eof_received(self) -> bool | None:
        self._close(None)
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._close(exc)

    def _close(self, exc: BaseException | None) -> None:
        if not self._closed:
            self._closed = True
            self._on_closed(exc)


# Status board layout, per slot: u64 heartbeat (ns), u32 pid, u32 frame length, frame bytes.
_SLOT_HEADER = struct.Struct("<QII")
_SLOT_FRAME = 8192  # a record frame is at most ~4.6 KiB (message 4096 + bounded fields)
SLOT_SIZE = _SLOT_HEADER.size + _SLOT_FRAME  # bytes per stage in the segment


class StatusBoard:
    """Shared-memory heartbeat and last-words slots, one per stage.

    The supervisor `create`s and is the only one to `unlink`; stages `attach` by name. Spawned
    children share the parent's resource tracker, so attaching registers nothing new and a
    supervisor killed with SIGKILL still has its segment removed by the tracker.
    """

    def __init__(self, shm: shared_memory.SharedMemory, slots: int, owner: bool) -> None:
        self._shm = shm
        assert shm.buf is not None
        self._buf: memoryview = shm.buf
        self.slots = slots
        self.owner = owner
        self._unlinked = False

    @classmethod
    def create(cls, slots: int, prefix: str = "omni_lc_") -> StatusBoard:
        name = f"{prefix}{os.getpid()}_{secrets.token_hex(4)}"
        shm = shared_memory.SharedMemory(name=name, create=True, size=max(1, slots) * SLOT_SIZE)
        # ftruncate zero-fills a new segment: every heartbeat and last-words length starts at 0
        return cls(shm, slots, owner=True)

    @classmethod
    def attach(cls, name: str, slots: int) -> StatusBoard:
        return cls(shared_memory.SharedMemory(name=name), slots, owner=False)

    @property
    def name(self) -> str:
        return self._shm.name

    def beat(self, slot: int, now_ns: int) -> None:
        struct.pack_into("<Q", self._buf, slot * SLOT_SIZE, now_ns)

    def last_beat(self, slot: int) -> int:
        return int(struct.unpack_from("<Q", self._buf, slot * SLOT_SIZE)[0])

    def write_last_words(self, slot: int, details: OmniErrorDetails) -> None:
        base = slot * SLOT_SIZE
        n = omni_errors.encode_into(details, self._buf, base + _SLOT_HEADER.size)
        struct.pack_into("<II", self._buf, base + 8, os.getpid(), n)

    def read_last_words(self, slot: int) -> OmniErrorDetails | None:
        base = slot * SLOT_SIZE
        _, _, n = _SLOT_HEADER.unpack_from(self._buf, base)
        if n == 0 or n > _SLOT_FRAME:
            return None
        start = base + _SLOT_HEADER.size
        try:
            return omni_errors.decode(self._buf[start : start + n])
        except omni_errors.DecodeError:
            return None  # torn: the stage died while writing; the caller synthesizes a record

    def close(self) -> None:
        self._buf = memoryview(b"")  # drop our view of the mapping so close() can unmap it
        self._shm.close()

    def unlink(self) -> None:
        """Close and remove the segment (owner only, idempotent)."""
        self.close()
        if self.owner and not self._unlinked:
            self._unlinked = True
            try:
                self._shm.unlink()
            except FileNotFoundError:
                pass
