"""The remote link on loopback (no root needed): configuration and keys, the allow-list, frames
decoded from zmq.Frame buffers, the high-water mark's 503, and peers of other frame versions.

The supervisor runs in this process on its own asyncio loop; peers are threads running the
library's client (`ZmqWorkerLink`) or processes speaking the protocol by hand (foreign_peer.py).
Every socket is a real CURVE socket on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import omni_errors
import pytest
import zmq
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.security import keys
from omni_errors.security.curve import as_client
from omni_errors_tools.chaos.watch import free_port
from omni_errors_tools.lifecycle import LifecycleConfig, StageRequestError, Supervisor
from omni_errors_tools.lifecycle.engine import RemoteStageSpec
from omni_errors_tools.lifecycle.remote.config import LinkConfig, LinkConfigError, StageConnectConfig, endpoint_host
from omni_errors_tools.lifecycle.remote.messages import Hello, ProtocolError, SeqCheck, Welcome
from omni_errors_tools.lifecycle.remote.stage_side import StageJoinError, ZmqWorkerLink

FOREIGN_PEER = Path(__file__).with_name("foreign_peer.py")


def _link(keydir: Path, port: int, **kw: Any) -> LinkConfig:
    return LinkConfig(
        f"tcp://127.0.0.1:{port}", secret_key=keydir / "server.key_secret", allow=(keydir / "stage.key",), **kw
    )


def _connect(
    keydir: Path, port: int, key: str = "stage", server: str = "server", timeout: float = 20.0
) -> StageConnectConfig:
    return StageConnectConfig(
        f"tcp://127.0.0.1:{port}",
        secret_key=keydir / f"{key}.key_secret",
        server_key=keydir / f"{server}.key",
        connect_timeout=timeout,
    )


# -- configuration and keys ------------------------------------------------------------------


def test_plaintext_only_on_loopback() -> None:
    with pytest.raises(LinkConfigError, match=r"only allowed on a loopback address .* not '169.254.0.1'"):
        LinkConfig("tcp://169.254.0.1:5570", plaintext=True)
    with pytest.raises(LinkConfigError, match="only allowed on a loopback address"):
        StageConnectConfig("tcp://stagehost:5570", plaintext=True)  # a name could resolve anywhere
    assert LinkConfig("tcp://127.0.0.2:5570", plaintext=True).plaintext
    assert StageConnectConfig("tcp://[::1]:5570", plaintext=True).plaintext


def test_curve_needs_keys() -> None:
    with pytest.raises(LinkConfigError, match="needs the server's secret key and at least one allowed stage key"):
        LinkConfig("tcp://10.0.0.1:5570")
    with pytest.raises(LinkConfigError, match="needs its own secret key and the server's public key"):
        StageConnectConfig("tcp://10.0.0.1:5570", secret_key=Path("x.key_secret"))
    with pytest.raises(LinkConfigError, match="takes no keys"):
        LinkConfig("tcp://127.0.0.1:5570", plaintext=True, secret_key=Path("s"))


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [
        ("ipc:///tmp/x", "must look like tcp://HOST:PORT"),
        ("tcp://10.0.0.1", "needs a port"),
        ("tcp://10.0.0.1:0", "needs a port"),
        ("tcp://*:5570", "explicit address"),
    ],
)
def test_endpoint_errors(endpoint: str, message: str) -> None:
    with pytest.raises(LinkConfigError, match=message):
        endpoint_host(endpoint)


def test_deadlines_are_checked() -> None:
    with pytest.raises(LinkConfigError, match="at least 3 heartbeat intervals"):
        LinkConfig("tcp://127.0.0.1:1", plaintext=True, heartbeat_interval=1.0, timeout=2.0)
    with pytest.raises(LinkConfigError, match="must be >= timeout"):
        LinkConfig("tcp://127.0.0.1:1", plaintext=True, timeout=20.0)


def test_generated_key_files(tmp_path: Path) -> None:
    public, secret = keys.generate(tmp_path / "k", "code2wav")
    assert (public.stat().st_mode & 0o777, secret.stat().st_mode & 0o777) == (0o644, 0o600)
    assert (tmp_path / "k").stat().st_mode & 0o777 == 0o700
    pub, sec = keys.load_secret(secret)
    assert keys.load_public(public) == pub and len(sec) == 40
    assert keys.load_allowed((tmp_path / "k",)) == {pub}
    with pytest.raises(keys.KeyFileError, match="already exist; pass --force"):
        keys.generate(tmp_path / "k", "code2wav")
    assert keys.generate(tmp_path / "k", "code2wav", force=True) == (public, secret)
    assert keys.load_public(public) != pub


def test_key_file_errors(tmp_path: Path) -> None:
    public, secret = keys.generate(tmp_path, "s")
    secret.chmod(0o640)
    with pytest.raises(keys.KeyFileError, match=r"readable by others \(mode 0640\); run `chmod 600"):
        keys.load_secret(secret)
    with pytest.raises(keys.KeyFileError, match=r"holds no secret key: pass the \.key_secret file"):
        keys.load_secret(public)
    with pytest.raises(keys.KeyFileError, match="does not exist"):
        keys.load_public(tmp_path / "missing.key")
    (tmp_path / "bad.key").write_text('curve\n    public-key = "short"\n')
    with pytest.raises(keys.KeyFileError, match="malformed key"):
        keys.load_public(tmp_path / "bad.key")
    (tmp_path / "empty").mkdir()
    with pytest.raises(keys.KeyFileError, match=r"holds no \*\.key files"):
        keys.load_allowed((tmp_path / "empty",))
    with pytest.raises(keys.KeyFileError, match="must be 1-64 characters"):
        keys.generate(tmp_path, "../escape")


# -- protocol ------------------------------------------------------------------------------------


def test_sequence_numbers_accept_only_the_next() -> None:
    check = SeqCheck()
    check.accept(0)
    check.accept(1)
    with pytest.raises(ProtocolError, match=r"message 4 arrived where 2 was due \(2 missing\)"):
        check.accept(4)
    with pytest.raises(ProtocolError, match=r"message 1 arrived where 2 was due \(repeated\)"):
        check.accept(1)


def test_hello_and_welcome_round_trip() -> None:
    hello = Hello(2, "code2wav", "ab12", frame_version=(1, 7), host="gpu-1", pid=42)
    assert Hello.decode(hello.encode()) == hello
    welcome = Welcome("ab12", {"seed": 1, "pcm": b"\x00"}, 0.25, 5.0, 0.2, 2.0, 3.0)
    assert Welcome.decode(welcome.encode()) == welcome
    with pytest.raises(ProtocolError, match="HELLO body is a list"):
        Hello.decode(b"\x90")
    with pytest.raises(ProtocolError, match="malformed HELLO"):
        Hello.decode(b"\x80")


def test_error_frames_decode_from_the_zmq_frame_buffer() -> None:
    """What the link does with every error frame: recv(copy=False), decode from `frame.buffer`,
    a memoryview over libzmq's own message (no bytes object is made)."""
    details = omni_errors.OmniErrorDetails("x", "server", 503, "ServiceUnavailableError", stage_id=2)
    ctx = zmq.Context()
    try:
        a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
        a.bind("inproc://zero-copy")
        b.connect("inproc://zero-copy")
        a.send(omni_errors.encode(details))
        frame = b.recv(copy=False)
        view = frame.buffer
        assert isinstance(frame, zmq.Frame) and view.obj is frame
        assert omni_errors.decode(view) == details
    finally:
        ctx.destroy(0)


@pytest.mark.xfail(
    strict=True,
    reason="the extension's buffer access (PyO3 PyBuffer) needs strides, which zmq.Frame's exporter leaves "
    "NULL; the link decodes `frame.buffer` instead (same memory, no copy). Remove once decode takes a Frame.",
)
def test_decode_takes_a_zmq_frame_itself() -> None:
    details = omni_errors.OmniErrorDetails("x", "client", 400, "BadRequestError")
    assert omni_errors.decode(zmq.Frame(omni_errors.encode(details))) == details


# -- a supervisor and its peers ------------------------------------------------------------------


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 120))


@pytest.fixture
def port() -> int:
    return free_port()


def test_a_key_not_allowed_never_reaches_the_supervisor_socket(keydir: Path, port: int) -> None:
    """Three peers try first: an unknown key, the right key with a wrong server key, no CURVE at
    all. The supervisor's socket receives nothing from any of them; then the real stage joins."""
    results: dict[str, Any] = {}

    def attempts() -> None:
        for name, cfg in (
            ("rogue", _connect(keydir, port, key="rogue")),
            ("wrong_server_key", _connect(keydir, port, server="rogue", timeout=3.0)),
        ):
            try:
                ZmqWorkerLink.join(cfg, Hello(0, "ar", name))
                results[name] = "joined"
            except StageJoinError as exc:
                results[name] = str(exc)
        ctx = zmq.Context()  # a plaintext peer flooding a CURVE socket
        raw = ctx.socket(zmq.DEALER)
        raw.connect(f"tcp://127.0.0.1:{port}")
        sent = 0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                raw.send_multipart([b"\x20" + bytes(9), b"flood"], zmq.NOBLOCK)
                sent += 1
            except zmq.Again:  # its queue is full: nothing is getting through
                time.sleep(0.01)
        results["plaintext_queued"] = sent
        ctx.destroy(0)
        results["before_legit"] = sup.link_stats().as_dict()  # type: ignore[union-attr]
        link, _ = ZmqWorkerLink.join(_connect(keydir, port), Hello(0, "ar", "legit"))
        link.ready()
        time.sleep(0.5)
        link.close(0)

    async def main() -> None:
        nonlocal sup
        sup = Supervisor([RemoteStageSpec("ar")], LifecycleConfig(startup_timeout=60), link=_link(keydir, port))
        peer = threading.Thread(target=attempts)
        start = asyncio.ensure_future(sup.start())
        await asyncio.sleep(0.2)
        peer.start()
        await start
        await asyncio.to_thread(peer.join, 60)
        await sup.shutdown()

    sup: Supervisor | None = None
    _run(main())
    assert "refused this stage's key (ZAP status 400)" in results["rogue"]
    assert "within 3s: the CURVE handshake failed" in results["wrong_server_key"]
    assert "a wrong server key" in results["wrong_server_key"]
    before = results["before_legit"]
    assert before["received"] == 0 and before["by_key"] == {}  # not one frame from the three peers
    assert before["auth_denied"] >= 1 and before["auth_allowed"] == 0
    assert sup is not None
    stats = sup.link_stats()
    assert stats is not None and stats.received > 0
    legit = keys.load_public(keydir / "stage.key").decode()
    assert stats.by_key == {legit: stats.received}  # every frame ever received came from the allowed key


def test_full_link_queue_answers_503(keydir: Path, port: int) -> None:
    """A stage that stops reading: its queue fills to the high-water mark, then requests get 503.
    Beyond that, the in-flight limit bounds the pipeline itself (503 as well)."""
    joined = threading.Event()
    done = threading.Event()

    def silent_stage() -> None:  # joins, says READY, then never reads again
        ctx = zmq.Context()
        sock = ctx.socket(zmq.DEALER)
        sock.setsockopt(zmq.RCVHWM, 16)
        curve = _connect(keydir, port).curve_keys()
        assert curve is not None
        as_client(sock, curve)
        sock.connect(f"tcp://127.0.0.1:{port}")
        from omni_errors_tools.lifecycle.channels import Kind
        from omni_errors_tools.lifecycle.remote.messages import header

        sock.send_multipart([header(Kind.HELLO, 0), Hello(0, "ar", "silent").encode()])
        sock.recv_multipart()
        sock.send_multipart([header(Kind.READY, 1)])
        joined.set()
        done.wait(60)
        ctx.destroy(0)

    async def main() -> list[StageRequestError]:
        link = _link(keydir, port, hwm=16, timeout=30, stage_timeout=30)
        cfg = LifecycleConfig(startup_timeout=60, max_inflight=1000)
        sup = Supervisor([RemoteStageSpec("ar")], cfg, link=link, error_factory=StageRequestError)
        peer = threading.Thread(target=silent_stage)
        peer.start()
        await sup.start()
        refused: list[StageRequestError] = []
        big = {"blob": os.urandom(1 << 20)}
        for _ in range(200):
            try:
                sup.submit(big)
            except StageRequestError as exc:
                refused.append(exc)
                break
            await asyncio.sleep(0.01)  # let libzmq move messages out to the kernel
        done.set()
        await sup.shutdown()
        await asyncio.to_thread(peer.join, 30)
        return refused

    refused = _run(main())
    assert len(refused) == 1
    d = refused[0].details
    assert (d.status_code, d.error_type, d.stage_id, d.message) == (
        503,
        "ServiceUnavailableError",
        0,
        "Stage 0 is at capacity; retry later",
    )


def test_in_flight_limit_answers_503(keydir: Path, port: int) -> None:
    def stage() -> None:
        link, _ = ZmqWorkerLink.join(_connect(keydir, port), Hello(0, "ar", "limit"))
        link.ready()
        time.sleep(1.0)
        link.close(0)

    async def main() -> StageRequestError:
        cfg = LifecycleConfig(startup_timeout=60, max_inflight=2)
        sup = Supervisor([RemoteStageSpec("ar")], cfg, link=_link(keydir, port), error_factory=StageRequestError)
        peer = threading.Thread(target=stage)
        peer.start()
        await sup.start()
        sup.submit({"prompt": [1]})
        sup.submit({"prompt": [1]})
        try:
            sup.submit({"prompt": [1]})
        except StageRequestError as exc:
            return exc
        finally:
            await sup.shutdown()
            await asyncio.to_thread(peer.join, 30)
        raise AssertionError("the third request was accepted")

    d = _run(main()).details
    assert (d.status_code, d.stage_id, d.message) == (503, None, "The pipeline is at capacity; retry later")


@pytest.fixture
def foreign(keydir: Path) -> Iterator[Any]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(port: int, minor: int, extension: bool) -> subprocess.Popen[bytes]:
        cfg = {
            "endpoint": f"tcp://127.0.0.1:{port}",
            "secret_key": str(keydir / "stage.key_secret"),
            "server_key": str(keydir / "server.key"),
            "minor": minor,
            "extension": extension,
        }
        proc = subprocess.Popen([sys.executable, str(FOREIGN_PEER), json.dumps(cfg)])
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


# Read at run time: the frame's minor version moves on. While it is 0 there is no older minor,
# and the "older" peer writes the same minor without this library's extensions.
MINORS = {
    "older": (max(omni_errors.FRAME_MINOR - 1, 0), False),
    "newer_with_unknown_extension": (omni_errors.FRAME_MINOR + 1, True),
}


@pytest.mark.parametrize("which", list(MINORS))
def test_peer_of_another_frame_minor(which: str, foreign: Any, keydir: Path, port: int) -> None:
    """Per-request error frames and the FATAL last words, written by a peer pinned to another minor."""
    minor, extension = MINORS[which]

    async def main() -> tuple[list[Any], list[Any], Supervisor]:
        sup = Supervisor(
            [RemoteStageSpec("ar")],
            LifecycleConfig(startup_timeout=60),
            link=_link(keydir, port),
            error_factory=StageRequestError,
        )
        peer = foreign(port, minor, extension)
        await sup.start()
        errors = []
        for i in range(5):
            try:
                await sup.generate({"prompt": [i]}, request_id=f"r{i}")
            except StageRequestError as exc:
                errors.append(exc.details)
        waiting = [sup.submit({"hold": True}, request_id=f"w{i}") for i in range(3)]
        fatal = sup.submit({"fatal": True}, request_id="fatal")
        dead = []
        for rid in [*waiting, fatal]:
            try:
                [r async for r in sup.stream(rid)]
            except StageRequestError as exc:
                dead.append(exc.details)
        await sup.wait_dead()
        await asyncio.to_thread(peer.wait, 30)
        return errors, dead, sup

    errors, dead, sup = _run(main())
    assert [e.request_id for e in errors] == [f"r{i}" for i in range(5)]
    for e in errors:
        assert (e.status_code, e.category, e.error_type, e.parameter, e.stage_id) == (
            422,
            "client",
            "UnprocessableEntityError",
            "prompt",
            0,
        )
        assert e.message == f"prompt rejected by a minor-{minor} stage"
    assert len(dead) == 4 and all((d.status_code, d.fatal, d.stage_id) == (500, True, 0) for d in dead)
    assert sup.exit_code == int(ExitCode.OOM)  # the exit code the FATAL frame carried
    assert sup.dead_error is not None and sup.dead_error.error_type == "EngineDeadError"
