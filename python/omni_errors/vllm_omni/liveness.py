"""Liveness of a remote replica: whether the head and a remote stage process can still reach each other.

In vLLM-Omni's multi-node mode a remote `StageDiffusionProc` connects two TCP links to the head:
the head's PUSH (requests) and PULL (results). vLLM-Omni 0.30 watches nothing on them: the
head-side client of a remote replica has no process manager, so a SIGKILLed remote proc is only
noticed by the coordinator's heartbeat timeout (30 s, a cut too), and the remote proc never notices
that the head is gone. Here each link of a remote replica (a `tcp://` endpoint) gets:

- ZMTP heartbeats, set before it binds or connects: a PING every `HEARTBEAT_IVL_MS`, and a
  connection whose peer has said nothing for `HEARTBEAT_TIMEOUT_MS` is dropped (a network cut);
- a socket monitor, also set up before it binds or connects, read by one thread per replica
  (`LinkWatch`): a link whose peer completed its handshake and then disconnected (a reset or FIN
  when the peer dies, a heartbeat timeout when the network is cut) is lost, and the watch calls
  its `on_lost` once.

Which sockets are links is known by their endpoints: the plugin `expect`s a replica's two
addresses just before vLLM-Omni binds or connects them, and `sockets` hands each matching socket
here (`before` / `after`, from pyzmq's `bind` / `connect`). IPC endpoints (a stage on the head's
host) are only collected, never watched: the head watches a local proc's process itself.

`RemoteReplica` stands in for the process manager a remote client lacks: its process is alive while
the links are, so every method of `StageDiffusionClient` that consults the manager (`check_health`,
`get_diffusion_output_nowait`, `collective_rpc_async`, the sentinel thread) sees the link's state.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import zmq

from omni_errors.vllm_omni.settings import LOG_NAME

__all__ = [
    "HEARTBEAT_IVL_MS",
    "HEARTBEAT_TIMEOUT_MS",
    "LinkWatch",
    "RemoteProcess",
    "RemoteReplica",
    "after",
    "before",
    "expect",
]

_log = logging.getLogger(LOG_NAME)

#: A PING on every link this often...
HEARTBEAT_IVL_MS = 400
#: ...and a link whose peer stays silent this long is dropped (what a network cut looks like).
HEARTBEAT_TIMEOUT_MS = 1200
_POLL_MS = 250
_EVENTS = (
    zmq.EVENT_ACCEPTED
    | zmq.EVENT_CONNECTED
    | zmq.EVENT_HANDSHAKE_SUCCEEDED
    | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
    | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
    | zmq.EVENT_HANDSHAKE_FAILED_AUTH
    | zmq.EVENT_DISCONNECTED
    | zmq.EVENT_MONITOR_STOPPED
)
_FAILED = zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH


def _watched(endpoint: str) -> bool:
    return endpoint.startswith("tcp://")


class _Peers:
    """One link's connections, from its monitor's events: which completed their handshake.

    libzmq names a connection's file descriptor when it is accepted (or connected) and when it is
    dropped, but not in its handshake events; a handshake's outcome is given to the oldest
    connection still waiting for one (exact unless two handshakes overlap)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.waiting: list[int] = []  # connections whose handshake has no outcome yet, oldest first
        self.live: set[int] = set()  # connections whose handshake succeeded
        self.ever = False  # a peer completed a handshake at least once

    def event(self, event: int, value: int) -> bool:
        """Take one monitor event; True when the link has just lost its last peer."""
        if event & (zmq.EVENT_ACCEPTED | zmq.EVENT_CONNECTED):
            self.waiting.append(value)
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            if self.waiting:
                self.live.add(self.waiting.pop(0))
                self.ever = True
        elif event & _FAILED:
            if self.waiting:
                self.waiting.pop(0)
        elif event == zmq.EVENT_DISCONNECTED:
            if value in self.waiting:
                self.waiting.remove(value)
            elif value in self.live:
                self.live.discard(value)
                return not self.live
        return False


class LinkWatch:
    """One replica's links (its expected endpoints): the sockets, and a thread reading their monitors."""

    def __init__(self, name: str, endpoints: Sequence[str], on_lost: Callable[[str], None]) -> None:
        self.name = name
        self.endpoints = tuple(endpoints)
        self.sockets: dict[str, zmq.Socket[Any]] = {}
        self._on_lost = on_lost
        self._monitors: list[tuple[zmq.Socket[Any], _Peers]] = []
        self._lock = threading.Lock()  # the owner's thread adds monitors while this watch's thread reads them
        self._stop = threading.Event()
        self._lost = threading.Event()
        self._thread: threading.Thread | None = None

    def before(self, socket: zmq.Socket[Any], endpoint: str) -> None:
        """What a link needs before it binds or connects (the owner's thread): its options, and its
        monitor, so that no event is missed (under load a connect completes, handshake included,
        before `connect` returns to this thread)."""
        if not _watched(endpoint):
            return
        socket.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
        socket.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
        socket.setsockopt(zmq.HEARTBEAT_TTL, HEARTBEAT_TIMEOUT_MS)
        # What is still queued for a peer that is gone is never delivered: closing must not wait for it.
        socket.setsockopt(zmq.LINGER, 0)
        with self._lock:
            address = f"inproc://omni-errors-link-{id(self):x}-{len(self._monitors)}"
            socket.monitor(address, _EVENTS)
            # A sync PAIR in the same libzmq context, whatever the socket's flavour (asyncio in the proc).
            monitor: zmq.Socket[bytes] = (
                zmq.Context[zmq.Socket[bytes]].shadow(socket.context.underlying).socket(zmq.PAIR)
            )
            monitor.connect(address)
            self._monitors.append((monitor, _Peers(endpoint)))
            if self._thread is None:  # from the first monitor on: the thread closes each when its link closes
                self._thread = threading.Thread(target=self._run, name=f"omni-errors-links-{self.name}", daemon=True)
                self._thread.start()

    def attach(self, socket: zmq.Socket[Any], endpoint: str) -> None:
        """Collect a bound or connected link (the owner's thread)."""
        self.sockets[endpoint] = socket

    def stop(self) -> None:
        """Stop reporting (the owner is closing the links on purpose)."""
        self._stop.set()

    def _run(self) -> None:
        from zmq.utils.monitor import recv_monitor_message

        poller = zmq.Poller()
        peers_of: dict[zmq.Socket[Any], _Peers] = {}
        registered = 0
        try:
            while True:
                with self._lock:
                    added = self._monitors[registered:]
                for monitor, peers in added:  # a link's monitor set up since the last poll
                    poller.register(monitor, zmq.POLLIN)
                    peers_of[monitor] = peers
                registered += len(added)
                if not peers_of:  # every link was closed
                    break
                try:
                    ready = poller.poll(_POLL_MS)
                except zmq.ZMQError:  # the context is being terminated
                    break
                for monitor, _ in ready:
                    try:
                        message = recv_monitor_message(monitor, zmq.NOBLOCK)
                    except zmq.Again:
                        continue
                    except zmq.ZMQError:
                        message = {"event": zmq.EVENT_MONITOR_STOPPED, "value": 0}
                    event = message["event"]
                    if event == zmq.EVENT_MONITOR_STOPPED:  # the link was closed
                        poller.unregister(monitor)
                        del peers_of[monitor]
                    elif peers_of[monitor].event(event, message["value"]):
                        self._report(f"{peers_of[monitor].endpoint}: its peer disconnected or stopped answering")
        finally:
            with self._lock:
                monitors = list(self._monitors)
            for monitor, _ in monitors:
                monitor.close(linger=0)

    def _report(self, reason: str) -> None:
        if self._stop.is_set() or self._lost.is_set():
            return
        self._lost.set()
        try:
            self._on_lost(reason)
        except Exception:  # omni-errors: ignore[OE202]: logged; the watcher must survive its subscriber
            _log.exception("omni-errors: link-loss callback of %s failed", self.name)


_lock = threading.Lock()
_expected: dict[str, LinkWatch] = {}


def expect(watch: LinkWatch) -> None:
    """The next sockets bound or connected to `watch`'s endpoints are its links."""
    with _lock:
        for endpoint in watch.endpoints:
            _expected[endpoint] = watch


def before(socket: zmq.Socket[Any], endpoint: str) -> None:
    """Called by `sockets` before a bind or connect."""
    with _lock:
        watch = _expected.get(endpoint)
    if watch is not None:
        watch.before(socket, endpoint)


def after(socket: zmq.Socket[Any], endpoint: str) -> None:
    """Called by `sockets` after a bind or connect: an expected endpoint's socket joins its watch."""
    with _lock:
        watch = _expected.pop(endpoint, None)
    if watch is not None:
        watch.attach(socket, endpoint)


class RemoteProcess:
    """What `StageDiffusionClient` reads of its proc, for a proc on another host: alive while its links are."""

    name = "remote StageDiffusionProc"
    exitcode: int | None = None  # unknown on this host; the record says why it ended

    def __init__(self) -> None:
        self._read, self._write = os.pipe()  # the write end closes when the links are lost
        weakref.finalize(self, os.close, self._read)
        self._lock = threading.Lock()  # the watch's thread and the orchestrator's both end it
        self._alive = True

    @property
    def sentinel(self) -> int:
        return self._read

    def is_alive(self) -> bool:
        return self._alive

    def end(self) -> None:
        """The proc is gone (or let go): wakes whoever waits on the sentinel, once."""
        with self._lock:
            if not self._alive:
                return
            self._alive = False
        os.close(self._write)


class RemoteReplica:
    """The process manager a remote replica's client lacks: the links stand in for the process."""

    def __init__(self, watch: LinkWatch) -> None:
        self.proc = RemoteProcess()
        self.watch = watch
        self.manager_stopped = False

    def shutdown(self, timeout: float | None = None) -> None:
        """The head lets the replica go: nothing of it runs here, so only the watch stops."""
        self.manager_stopped = True
        self.watch.stop()
        self.proc.end()
