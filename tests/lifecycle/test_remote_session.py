"""The remote session's own state machine, without a socket: a `SessionTransport` that keeps what
is sent and answers with the refusal a test chooses. The link over real ZMQ sockets is
`test_remote_link.py`; this file checks what the session decides from its transport's answers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from omni_errors.lifecycle.channels import Kind
from omni_errors.lifecycle.engine import RemoteStageSpec
from omni_errors.lifecycle.links import LinkRefusedError, Refusal
from omni_errors.lifecycle.remote.config import LinkConfig
from omni_errors.lifecycle.remote.messages import Hello, Welcome, parse_header
from omni_errors.lifecycle.remote.session import RemoteStageLink, SessionStatus, SessionTransport
from omni_errors.lifecycle.supervisor_types import LifecycleConfig


@dataclass
class KeptTransport:
    """Keeps every message; `refusal` is the answer to the next sends (None: queued)."""

    config: LinkConfig = field(default_factory=lambda: LinkConfig("tcp://127.0.0.1:5570", plaintext=True))
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    refusal: Refusal | None = None
    sent: list[tuple[bytes, list[bytes]]] = field(default_factory=list)
    forgotten: list[bytes] = field(default_factory=list)

    def send(self, routing: bytes, frames: Sequence[bytes]) -> Refusal | None:
        if self.refusal is None:
            self.sent.append((routing, list(frames)))
        return self.refusal

    def drain(self) -> None:
        pass

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
