"""The stage link: one abstraction between the supervisor and a stage, two implementations.

`local.LocalStageLink` runs the stage as a child process joined by pipes and a shared-memory status
slot; `remote.session.RemoteStageLink` expects it from another host over an authenticated ZMQ link.
The supervisor calls the `StageLink` methods and receives `LinkListener` callbacks, and never
knows which kind it holds. On the stage side the worker loop drives a `WorkerLink` the same way.

Both carry the same messages (`channels.Kind`): requests (ADD, ABORT, SHUTDOWN) one way; READY or
FAILED, outputs, per-request error frames and the FATAL last words the other way; liveness (the
shm heartbeat locally, heartbeat messages both ways remotely). Each link reports its end exactly
once through `on_lost`, with the exit code that says how it ended.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from omni_errors import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode

__all__ = [
    "Abort",
    "Add",
    "Command",
    "LinkClosedError",
    "LinkListener",
    "LinkPayloadError",
    "LinkRefusedError",
    "Output",
    "Refusal",
    "Shutdown",
    "StageLink",
    "WorkerLink",
]

#: (request_id, payload, finished): one stage output as it crosses a link.
Output = tuple[str, Any, bool]


class Refusal(enum.Enum):
    """Why a link did not take a message now; the value is how a client's 503 says it."""

    FULL = "at capacity"  # the queue is at its high-water mark
    UNREACHABLE = "unreachable"  # the remote stage's connection is down (it may come back in time)


class LinkRefusedError(Exception):
    """The link cannot take the request now (`refusal` says why). The request is refused (503),
    never queued unbounded."""

    def __init__(self, refusal: Refusal, message: str) -> None:
        super().__init__(message)
        self.refusal = refusal


class LinkPayloadError(TypeError):
    """A payload this link cannot carry (a remote link carries msgpack data, never pickles)."""


class LinkClosedError(Exception):
    """Stage side: the supervisor is gone (EOF, broken pipe, or its heartbeats stopped)."""


class LinkListener(Protocol):
    """What the supervisor does when a link reports something (always on the supervisor's loop)."""

    def on_ready(self, link: StageLink) -> None: ...

    def on_startup_failed(self, link: StageLink, details: OmniErrorDetails, traceback: str) -> None: ...

    def on_outputs(self, link: StageLink, outputs: Sequence[Output]) -> None: ...

    def on_request_error(self, link: StageLink, details: OmniErrorDetails) -> None: ...

    def on_fatal(self, link: StageLink, details: OmniErrorDetails, code: ExitCode) -> None: ...

    def on_lost(self, link: StageLink, details: OmniErrorDetails | None, code: ExitCode, reason: str) -> None:
        """The stage ended without a FATAL frame. `details` are its last words when it left any."""


class StageLink(Protocol):
    """The supervisor's handle on one stage, local or remote."""

    stage_id: int
    name: str

    @property
    def where(self) -> str:
        """For logs: `pid 123` or `remote 169.254.0.2 (session ab12…)`."""

    @property
    def pid(self) -> int | None:
        """The stage's process id when it is a child of this process."""

    @property
    def alive(self) -> bool:
        """The stage may still be running: the kill path waits until this is False."""

    async def open(self, listener: LinkListener) -> None:
        """Start the stage (local) or start expecting it (remote); READY/FAILED arrive later."""

    def add(self, request_id: str, payload: Any) -> None:
        """Send a request; raises LinkRefusedError when the link cannot take it now."""

    def abort(self, request_id: str) -> None: ...

    def shutdown(self) -> None:
        """Ask the stage to stop cleanly (it shuts its engine down and exits 0)."""

    def progress_age(self, now: float) -> float:
        """Seconds (time.monotonic) since the stage's loop last turned: the hang detector's input."""

    def poll(self, now: float) -> None:
        """Periodic (the watchdog): send heartbeats that are due; report a missed deadline."""

    def terminate(self) -> None:
        """First step of the kill path: SIGTERM (local) or SHUTDOWN (remote)."""

    def kill(self) -> None:
        """Last step: SIGKILL (local) or abandon the session (remote: the stage's own deadline ends it)."""

    def close(self) -> None:
        """Release transports, readers and sockets; idempotent."""


@dataclass(frozen=True)
class Add:
    request_id: str
    payload: Any


@dataclass(frozen=True)
class Abort:
    request_id: str


@dataclass(frozen=True)
class Shutdown:
    pass


Command = Add | Abort | Shutdown


class WorkerLink(Protocol):
    """The stage's side of a link, driven by the worker loop (one thread, blocking calls)."""

    def wait(self, timeout: float, wake_fd: int) -> bool:
        """Block until a command is ready (True), `wake_fd` is readable or `timeout` passes (False)."""

    def commands(self, limit: int) -> list[Command]:
        """Up to `limit` ready commands, without blocking. Raises LinkClosedError."""

    def beat(self, now_ns: int) -> None:
        """A loop turn: the progress the supervisor's hang detector watches."""

    def ready(self) -> None: ...

    def failed(self, details: OmniErrorDetails, traceback: str) -> None: ...

    def outputs(self, outputs: Sequence[Output]) -> None: ...

    def request_errors(self, frames: Sequence[bytes]) -> None:
        """Per-request error frames (`omni_errors.encode`), sent together."""

    def fatal(self, details: OmniErrorDetails, code: ExitCode) -> None:
        """The last words: stored where the supervisor finds them even if this message is lost."""

    def close(self, code: int) -> None:
        """The stage is exiting with `code`; flush what is queued (bounded) and release the link."""
