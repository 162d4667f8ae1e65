"""The remote session's own state machine, without a socket: a `SessionTransport` that keeps what
is sent and answers with the refusal a test chooses. The link over real ZMQ sockets is
`test_remote_link.py`; this file checks what the session decides from its transport's answers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import omni_errors
import pytest
import zmq
from omni_errors import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import fatal_record
from omni_errors_tools.lifecycle.channels import Kind
from omni_errors_tools.lifecycle.engine import RemoteStageSpec
from omni_errors_tools.lifecycle.links import LinkRefusedError, Refusal
from omni_errors_tools.lifecycle.remote.config import LinkConfig
from omni_errors_tools.lifecycle.remote.messages import Hello, Welcome, parse_header
from omni_errors_tools.lifecycle.remote.session import RemoteStageLink, SessionStatus, SessionTransport
from omni_errors_tools.lifecycle.supervisor_types import LifecycleConfig


@dataclass
class KeptTransport:
    """Keeps every message; `refusal` is the answer to the next sends (None: queued); `on_drain`
    is what arrived unread (it runs when the session reads its socket)."""

    config: LinkConfig = field(default_factory=lambda: LinkConfig("tcp://127.0.0.1:5570", plaintext=True))
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    refusal: Refusal | None = None
    sent: list[tuple[bytes, list[bytes]]] = field(default_factory=list)
    forgotten: list[bytes] = field(default_factory=list)
    on_drain: Callable[[], None] | None = None

    def send(self, routing: bytes, frames: Sequence[bytes]) -> Refusal | None:
        if self.refusal is None:
            self.sent.append((routing, list(frames)))
        return self.refusal

    def drain(self) -> None:
        if self.on_drain is not None:
            self.on_drain()

    def forget(self, routing: bytes) -> None:
        self.forgotten.append(routing)


def _session() -> tuple[RemoteStageLink, KeptTransport]:
    transport = KeptTransport()
    checked: SessionTransport = transport  # the protocol is what the session needs, nothing more
    return RemoteStageLink(checked, 2, RemoteStageSpec("code2wav", {"voice": "a"})), transport


def test_a_session_refuses_requests_until_a_stage_joins() -> None:
    link, transport = _session()
    assert link.status is SessionStatus.WAITING and link.waiting and not link.alive
    with pytest.raises(LinkRefusedError) as refused:
        link.add("r1", {"text": "hi"})
    assert refused.value.refusal is Refusal.UNREACHABLE
    assert transport.sent == []


def test_join_welcomes_the_stage_then_numbers_every_message() -> None:
    link, transport = _session()
    link.join(b"peer-1", Hello(stage_id=2, name="code2wav", session="s" * 16))
    assert link.status is SessionStatus.JOINED and link.alive
    routing, frames = transport.sent[0]
    assert routing == b"peer-1" and parse_header(frames[0]) == (Kind.WELCOME, 0, 0)
    assert Welcome.decode(frames[1]).kwargs == {"voice": "a"}
    link.add("r1", {"text": "hi"})
    assert parse_header(transport.sent[1][1][0]) == (Kind.ADD, 0, 1)


@pytest.mark.parametrize("refusal", list(Refusal))
def test_a_refused_send_is_the_request_refused_and_spends_no_sequence_number(refusal: Refusal) -> None:
    link, transport = _session()
    link.join(b"peer-1", Hello(stage_id=2, name="code2wav", session="s" * 16))
    transport.refusal = refusal
    with pytest.raises(LinkRefusedError) as refused:
        link.add("r1", {"text": "hi"})
    assert refused.value.refusal is refusal
    transport.refusal = None
    link.add("r2", {"text": "hi"})
    assert parse_header(transport.sent[-1][1][0]) == (Kind.ADD, 0, 1)  # seq 1: the refused one was not spent


def test_an_ended_session_stays_ended() -> None:
    link, transport = _session()
    link.join(b"peer-1", Hello(stage_id=2, name="code2wav", session="s" * 16))
    link.kill()
    assert link.status is SessionStatus.ENDED and not link.alive and not link.waiting
    assert transport.forgotten == [b"peer-1"]
    with pytest.raises(LinkRefusedError):
        link.add("r1", {"text": "hi"})


@dataclass
class FatalListener:
    """The supervisor's side, as far as a stage's last words go."""

    fatal: list[tuple[OmniErrorDetails, ExitCode]] = field(default_factory=list)

    def on_fatal(self, link: object, details: OmniErrorDetails, code: ExitCode) -> None:
        self.fatal.append((details, code))


def test_a_stage_that_left_is_heard_out_before_its_request_is_refused() -> None:
    # The stage sent its FATAL and closed; the supervisor reads the record before it learns the
    # request cannot be sent, so the request is answered with the stage's own record (the FATAL
    # fails every request in flight), never with a 503 "unreachable" that hides the cause.
    link, transport = _session()
    listener = FatalListener()
    asyncio.run(link.open(listener))  # type: ignore[arg-type]  # only on_fatal is reached here
    link.join(b"peer-1", Hello(stage_id=2, name="code2wav", session="s" * 16))
    oom = fatal_record(stage_id=2)
    transport.on_drain = lambda: link.receive(Kind.FATAL, ExitCode.OOM, 1, [zmq.Frame(omni_errors.encode(oom))])
    transport.refusal = Refusal.UNREACHABLE
    with pytest.raises(LinkRefusedError):
        link.add("r1", {"text": "hi"})
    assert listener.fatal == [(oom, ExitCode.OOM)]


def test_a_full_link_is_not_read_before_its_refusal() -> None:
    link, transport = _session()
    link.join(b"peer-1", Hello(stage_id=2, name="code2wav", session="s" * 16))
    drained: list[bool] = []
    transport.on_drain = lambda: drained.append(True)
    transport.refusal = Refusal.FULL
    with pytest.raises(LinkRefusedError):
        link.add("r1", {"text": "hi"})
    assert drained == []  # the stage is there: nothing to hear out
