"""The link watch (`omni_errors.link_watch`) on real sockets, with a real peer process.

A "head" binds a PUSH and a PULL with the watch, the way a remote replica's client does (vLLM-Omni's
own with the upstream series, the plugin's on the release); a peer process connects to them as a
remote StageDiffusionProc does. The watch must report a peer that is killed or falls silent, once,
and nothing for a peer whose handshake fails or for links the head closes itself; a remote stage
process whose head is gone ends its loop with exit code 86 noted.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import zmq
from omni_errors import link_watch
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.link_watch import LinkWatch, RemoteReplica, head_links
from omni_errors_tools.chaos.watch import free_port

# The watch reports a killed peer in milliseconds and a silent one within IVL + TIMEOUT (1.6 s); these
# bounds only keep a broken watch from hanging the suite (the figures: benches/multinode_liveness.py).
REPORTED = 30.0
SILENT = 5.0

_PEER = textwrap.dedent(
    """
    import sys, time, zmq
    ctx = zmq.Context()
    pull, push = ctx.socket(zmq.PULL), ctx.socket(zmq.PUSH)
    pull.connect(sys.argv[1])
    push.connect(sys.argv[2])
    print("connected", flush=True)
    pull.recv()
    push.send(b"pong")
    time.sleep(600)
    """
)


class Head:
    """The head side of one replica's links: each socket bound through the watch (heartbeats and a
    monitor first). With `server_keys`, the links are CURVE servers."""

    def __init__(self, server_keys: tuple[bytes, bytes] | None = None) -> None:
        self.ctx: zmq.Context[Any] = zmq.Context()
        self.lost: list[str] = []
        self.reported = threading.Event()
        self.push, self.pull = self.ctx.socket(zmq.PUSH), self.ctx.socket(zmq.PULL)
        self.endpoints = (f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}")
        self.watch = LinkWatch("test", self.endpoints)
        self.watch.when_lost(self._on_lost)
        for sock, endpoint in zip((self.push, self.pull), self.endpoints, strict=True):
            if server_keys is not None:
                sock.curve_server = True
                sock.curve_publickey, sock.curve_secretkey = server_keys
            self.watch.bind(sock, endpoint)

    def _on_lost(self, reason: str) -> None:
        self.lost.append(reason)
        self.reported.set()

    def close(self) -> None:
        self.watch.stop()
        for sock in (self.push, self.pull):
            sock.close(linger=0)
        self.ctx.term()


@pytest.fixture
def head() -> Iterator[Head]:
    h = Head()
    try:
        yield h
    finally:
        h.close()


def _peer(head: Head) -> subprocess.Popen[str]:
    """A remote proc's side: connects both links (plaintext), answers one ping, then waits."""
    peer = subprocess.Popen([sys.executable, "-c", _PEER, *head.endpoints], stdout=subprocess.PIPE, text=True)
    assert peer.stdout is not None and peer.stdout.readline().strip() == "connected"
    return peer


def _exchange(head: Head) -> None:
    head.push.send(b"ping")
    assert head.pull.poll(30_000), "the peer never answered"
    assert head.pull.recv() == b"pong"


def _end(peer: subprocess.Popen[str]) -> None:
    if peer.poll() is None:
        peer.kill()
    peer.wait(30)
    if peer.stdout is not None:
        peer.stdout.close()


def test_before_sets_heartbeats_and_no_linger_on_a_tcp_link() -> None:
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        sock = ctx.socket(zmq.PUSH)
        LinkWatch("t", ("tcp://127.0.0.1:1",)).before(sock, "tcp://127.0.0.1:1")
        assert sock.getsockopt(zmq.HEARTBEAT_IVL) == link_watch.HEARTBEAT_IVL_MS
        assert sock.getsockopt(zmq.HEARTBEAT_TIMEOUT) == link_watch.HEARTBEAT_TIMEOUT_MS
        assert sock.getsockopt(zmq.LINGER) == 0
        ipc = ctx.socket(zmq.PUSH)
        LinkWatch("t", ("ipc:///tmp/x",)).before(ipc, "ipc:///tmp/x")
        assert ipc.getsockopt(zmq.HEARTBEAT_IVL) == 0  # a local proc is watched by its process, not here
        for s in (sock, ipc):
            s.close(linger=0)
    finally:
        ctx.term()


def test_a_link_without_heartbeats_gets_keepalive_probes_and_may_keep_its_linger() -> None:
    """An LLM stage's engine-core links: TCP keepalive instead of ZMTP heartbeats, and (the stage's
    outputs) the linger vLLM gave them, so that a death notice still goes out."""
    ctx: zmq.Context[Any] = zmq.Context()
    try:
        sock = ctx.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 4000)
        watch = LinkWatch("t", ("tcp://127.0.0.1:1",), keep_linger=True, heartbeats=False)
        watch.before(sock, "tcp://127.0.0.1:1")
        assert sock.getsockopt(zmq.HEARTBEAT_IVL) == 0
        assert sock.getsockopt(zmq.TCP_KEEPALIVE) == 1
        assert sock.getsockopt(zmq.TCP_KEEPALIVE_IDLE) == link_watch.KEEPALIVE_IDLE_S
        assert sock.getsockopt(zmq.TCP_KEEPALIVE_INTVL) == link_watch.KEEPALIVE_INTVL_S
        assert sock.getsockopt(zmq.TCP_KEEPALIVE_CNT) == link_watch.KEEPALIVE_PROBES
        assert sock.getsockopt(zmq.LINGER) == 4000
        sock.close(linger=0)
    finally:
        ctx.term()


def test_a_killed_peer_is_reported_once(head: Head) -> None:
    peer = _peer(head)
    try:
        _exchange(head)
        os.kill(peer.pid, signal.SIGKILL)
        assert head.reported.wait(REPORTED)
        time.sleep(0.5)
        assert len(head.lost) == 1
    finally:
        _end(peer)


def test_a_silent_peer_is_reported_by_its_missing_heartbeats(head: Head) -> None:
    peer = _peer(head)
    try:
        _exchange(head)
        stopped = time.monotonic()
        os.kill(peer.pid, signal.SIGSTOP)
        assert head.reported.wait(REPORTED)
        after = time.monotonic() - stopped
        print(f"a silent peer was reported after {after:.2f}s")
        assert after > (link_watch.HEARTBEAT_TIMEOUT_MS / 1000) * 0.9  # by the heartbeat deadline, not by chance
    finally:
        os.kill(peer.pid, signal.SIGCONT)
        _end(peer)


def test_a_peer_that_stays_is_never_reported(head: Head) -> None:
    peer = _peer(head)
    try:
        _exchange(head)
        assert not head.reported.wait(SILENT)  # heartbeats answered: the link holds
    finally:
        _end(peer)


def test_a_failed_handshake_is_not_a_lost_peer() -> None:
    head = Head(zmq.curve_keypair())  # CURVE links: a plaintext peer fails its handshake, again and again
    try:
        stranger = _peer(head)
        try:
            assert not head.reported.wait(SILENT), head.lost
        finally:
            _end(stranger)
        assert not head.reported.wait(1.0), head.lost
    finally:
        head.close()


def test_links_the_head_closes_itself_are_not_reported() -> None:
    head = Head()
    peer = _peer(head)
    try:
        _exchange(head)
        head.close()  # stops the watch, then closes the links
        os.kill(peer.pid, signal.SIGKILL)
        assert not head.reported.wait(2.0)
    finally:
        _end(peer)


def test_a_remote_replica_stands_in_for_its_process() -> None:
    import multiprocessing.connection

    replica = RemoteReplica(LinkWatch("t", ()))
    assert replica.proc.is_alive() and replica.proc.exitcode is None
    assert multiprocessing.connection.wait([replica.proc.sentinel], timeout=0) == []
    replica.shutdown()
    assert not replica.proc.is_alive()
    assert multiprocessing.connection.wait([replica.proc.sentinel], timeout=5) == [replica.proc.sentinel]


_BINDER = textwrap.dedent(
    """
    import time, zmq
    pull = zmq.Context().socket(zmq.PULL)
    print(pull.bind_to_random_port("tcp://127.0.0.1"), flush=True)
    pull.recv()
    print("received", flush=True)
    time.sleep(600)
    """
)


def _binder() -> tuple[subprocess.Popen[str], str]:
    """A head's side, as a remote proc sees it: a process binding a PULL; its endpoint."""
    peer = subprocess.Popen([sys.executable, "-c", _BINDER], stdout=subprocess.PIPE, text=True)
    assert peer.stdout is not None
    return peer, f"tcp://127.0.0.1:{int(peer.stdout.readline())}"


def test_a_connect_that_completes_before_its_socket_is_collected_is_watched() -> None:
    """Under load a connect completes, handshake included, before `connect` returns to its thread (a
    remote proc's links to its head): the watch still sees the link, and its peer's death."""
    peer, endpoint = _binder()
    ctx: zmq.Context[Any] = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    lost = threading.Event()
    watch = LinkWatch("proc", (endpoint,))
    watch.when_lost(lambda reason: lost.set())
    try:
        watch.before(push, endpoint)
        push.connect(endpoint)
        push.send(b"x")
        assert peer.stdout is not None and peer.stdout.readline().strip() == "received"  # not yet collected
        watch.attach(push, endpoint)
        os.kill(peer.pid, signal.SIGKILL)
        assert lost.wait(REPORTED), "the link's peer died and the watch never said so"
    finally:
        watch.stop()
        push.close(linger=0)
        ctx.term()
        _end(peer)


class _Logged(logging.Handler):
    """Sets `seen` when the watch logs that its links are lost."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "are lost" in record.getMessage():
            self.seen.set()


def test_a_subscriber_that_comes_after_the_loss_is_told_at_once() -> None:
    logged = _Logged()
    logging.getLogger(link_watch.__name__).addHandler(logged)
    peer, endpoint = _binder()
    watch = LinkWatch("late", (endpoint,))
    ctx: zmq.Context[Any] = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    try:
        watch.connect(push, endpoint)
        push.send(b"x")
        assert peer.stdout is not None and peer.stdout.readline().strip() == "received"
        os.kill(peer.pid, signal.SIGKILL)
        assert logged.seen.wait(REPORTED), "the watch never saw its peer die"
        told: list[str] = []
        watch.when_lost(told.append)
        assert len(told) == 1 and endpoint in told[0]
    finally:
        logging.getLogger(link_watch.__name__).removeHandler(logged)
        watch.stop()
        push.close(linger=0)
        ctx.term()
        _end(peer)


def test_a_remote_replicas_process_ends_when_its_links_are_lost() -> None:
    import multiprocessing.connection

    head = Head()
    replica = RemoteReplica(head.watch)  # the watch's subscriber is now the replica
    peer = _peer(head)
    try:
        _exchange(head)
        os.kill(peer.pid, signal.SIGKILL)
        assert multiprocessing.connection.wait([replica.proc.sentinel], timeout=REPORTED) == [replica.proc.sentinel]
        assert not replica.proc.is_alive()
    finally:
        replica.shutdown()
        head.close()
        _end(peer)


def test_a_remote_replicas_links_stand_in_for_its_engine_manager() -> None:
    """What vLLM's engine monitor thread calls on an LLM client's engine manager returns once the
    replica's links are lost (the client then marks its engine dead), or once the head lets it go."""
    head = Head()
    replica = RemoteReplica(head.watch)
    peer = _peer(head)
    monitor = threading.Thread(target=replica.monitor_engine_liveness, daemon=True)
    try:
        _exchange(head)
        monitor.start()
        assert monitor.is_alive()  # the links hold: it waits
        os.kill(peer.pid, signal.SIGKILL)
        monitor.join(REPORTED)
        assert not monitor.is_alive(), "the links were lost and the monitor still waited"
    finally:
        replica.shutdown()
        head.close()
        _end(peer)
    let_go = RemoteReplica(LinkWatch("t", ()))
    monitor = threading.Thread(target=let_go.monitor_engine_liveness, daemon=True)
    monitor.start()
    let_go.shutdown()
    monitor.join(REPORTED)
    assert not monitor.is_alive(), "the head let the replica go and the monitor still waited"


def test_a_stage_whose_head_is_gone_ends_its_loop_and_notes_86() -> None:
    """`head_links`, as a remote proc's `run_loop` uses it: the head dies, the loop's task is cancelled
    and the fatal state holds `ExitCode.LINK_LOST`, the code the proc then exits with."""
    peer, endpoint = _binder()
    ctx: zmq.Context[Any] = zmq.Context()
    push = ctx.socket(zmq.PUSH)

    async def run_loop() -> None:
        watch = head_links((endpoint,))
        try:
            watch.connect(push, endpoint)
            push.send(b"x")
            await asyncio.sleep(REPORTED * 2)  # the loop's recv: only the head's loss ends it here
        finally:
            watch.stop()

    async def main() -> bool:
        task = asyncio.create_task(run_loop())
        assert peer.stdout is not None
        await asyncio.to_thread(peer.stdout.readline)  # the head took the message: the link is up
        os.kill(peer.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(task, REPORTED)
        except asyncio.CancelledError:
            return True
        return False

    try:
        assert asyncio.run(main()), "the loop ran on after its head was gone"
        assert fatal.exit_code() == ExitCode.LINK_LOST
    finally:
        fatal.reset()
        push.close(linger=0)
        ctx.term()
        _end(peer)
