"""The one ZMQ security setup (`omni_errors.security`): the loopback rule, the allow-list, CURVE.

Real sockets on loopback: a CURVE server behind the allow-list, a client with an allowed key and one
without. The remote link (tests/lifecycle) and the plugin's sockets (tests/vllm_omni) use the same
setup end to end.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import zmq
from omni_errors.security.curve import (
    MAX_REFUSALS_LOGGED,
    AllowList,
    as_client,
    as_server,
    endpoint_is_loopback,
    is_loopback,
)
from omni_errors.security.keys import CurveKeys, KeyFileError, generate, load_directory, load_public, load_secret


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.5.5.5", True),
        ("::1", True),
        ("[::1]", True),
        ("::1%lo", True),
        ("localhost", False),  # a name resolves wherever the resolver says
        ("10.0.0.1", False),
        ("fe80::1%veth0", False),
        ("0.0.0.0", False),
        ("*", False),
        ("", False),
    ],
)
def test_only_a_loopback_ip_literal_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_endpoints() -> None:
    assert endpoint_is_loopback("tcp://127.0.0.1:5555")
    assert endpoint_is_loopback("tcp://[::1]:5555")
    assert not endpoint_is_loopback("tcp://*:5555")
    assert not endpoint_is_loopback("tcp://localhost:5555")
    assert not endpoint_is_loopback("ipc:///tmp/x")


def test_refusals_are_logged_once_per_key_and_bounded(caplog: pytest.LogCaptureFixture) -> None:
    decisions: list[bool] = []
    allow = AllowList(frozenset({b"a" * 40}), logging.getLogger("test.security"), decisions.append)
    with caplog.at_level(logging.WARNING, "test.security"):
        assert allow.callback("*", b"a" * 40)
        for i in range(MAX_REFUSALS_LOGGED * 2):
            assert not allow.callback("*", f"{i:040d}".encode())
            assert not allow.callback("*", f"{i:040d}".encode())  # the same key again: counted, not logged
    assert decisions.count(True) == 1 and decisions.count(False) == MAX_REFUSALS_LOGGED * 4
    assert len(caplog.records) == MAX_REFUSALS_LOGGED


def _keys(directory: Path, name: str) -> CurveKeys:
    generate(directory, name)
    return CurveKeys(*load_secret(directory / f"{name}.key_secret"))


def test_a_curve_server_lets_in_only_allowed_keys(tmp_path: Path) -> None:
    server, allowed, stranger = (_keys(tmp_path / n, n) for n in ("server", "allowed", "stranger"))
    ctx: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    auth = AllowList(frozenset({allowed.public}), logging.getLogger("test.security")).start(ctx)
    sockets = [pull := ctx.socket(zmq.PULL)]
    try:
        as_server(pull, server)
        port = pull.bind_to_random_port("tcp://127.0.0.1")
        for client, message in ((stranger, b"from a stranger"), (allowed, b"from a friend")):
            sockets.append(push := ctx.socket(zmq.PUSH))
            push.setsockopt(zmq.LINGER, 0)
            as_client(push, CurveKeys(client.public, client.secret, server=server.public))
            push.connect(f"tcp://127.0.0.1:{port}")
            push.send(message)
        assert pull.poll(10_000)
        assert pull.recv() == b"from a friend"  # the stranger's message never arrived
        assert not pull.poll(500)
    finally:
        for sock in sockets:
            sock.close(linger=0)
        auth.stop()
        ctx.term()


def test_a_host_directory_holds_exactly_one_secret_and_the_server_key(tmp_path: Path) -> None:
    generate(tmp_path, "head")
    keys = load_directory(tmp_path, "head", setting="KEYS")
    assert keys.server == keys.public == load_public(tmp_path / "head.key")
    assert keys.allowed == frozenset({keys.public})
    generate(tmp_path, "stage0")
    with pytest.raises(KeyFileError, match=r"KEYS=.* must hold exactly one secret key, this host's \(found: "):
        load_directory(tmp_path, "head", setting="KEYS")
    with pytest.raises(KeyFileError, match="is not a directory"):
        load_directory(tmp_path / "absent", "head", setting="KEYS")
