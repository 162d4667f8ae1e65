"""Liveness of a ZMQ link between hosts: whether its two ends can still reach each other.

In vLLM-Omni's multi-node mode a remote `StageDiffusionProc` connects two TCP links to the head:
the head's PUSH (requests) and PULL (results). Nothing at the socket level says when the peer is
gone: a SIGKILLed remote proc is only noticed by the coordinator's heartbeat timeout (30 s, a cut
too), and a remote proc never notices that its head is gone. A `LinkWatch` gives each `tcp://` link:

- ZMTP heartbeats, set before it binds or connects: a PING every `HEARTBEAT_IVL_MS`, and a
  connection whose peer has said nothing for `HEARTBEAT_TIMEOUT_MS` is dropped (a network cut); or,
  for the links of an LLM stage's engine core (vLLM's asyncio sockets), TCP keepalive probes;
- a socket monitor, also set up before it binds or connects, read by one thread per watch: a link
  whose peer completed its handshake and then disconnected (a reset or FIN when the peer dies, a
  heartbeat timeout when the network is cut) is lost, and the watch tells its subscriber once.

IPC and inproc endpoints (one host) are bound or connected as they are: a local process is watched
by its own sentinel. `RemoteReplica` stands in for the process manager a remote replica's client
lacks (its process is alive while its links are: a diffusion client's `_proc_manager`, an LLM
client's engine manager, which vLLM's own monitor reads); `head_links` ends a remote stage process
whose head is gone (exit 86, `ExitCode.LINK_LOST`). vLLM-Omni calls these from its own client and proc
(the upstream series); the plugin, on a release without them, from its wraps.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import weakref
from collections.abc import Callable, Sequence
from multiprocessing import connection
from typing import Any

import zmq

from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode

__all__ = [
    "HEARTBEAT_IVL_MS",
    "HEARTBEAT_TIMEOUT_MS",
    "KEEPALIVE_IDLE_S",
    "KEEPALIVE_INTVL_S",
    "KEEPALIVE_PROBES",
    "LinkWatch",
    "RemoteProcess",
    "RemoteReplica",
    "head_links",
]

_log = logging.getLogger(__name__)

#: A PING on every link this often...
HEARTBEAT_IVL_MS = 400
#: ...and a link whose peer stays silent this long is dropped (what a network cut looks like).
HEARTBEAT_TIMEOUT_MS = 1200
_POLL_MS = 250
#: A link without heartbeats: a probe after this many idle seconds, one every KEEPALIVE_INTVL_S, and the
#: peer is gone after KEEPALIVE_PROBES unanswered (about 3 s on an idle link).
KEEPALIVE_IDLE_S = 1
KEEPALIVE_INTVL_S = 1
KEEPALIVE_PROBES = 2
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

    def event(self, event: int, value: int) -> bool:
        """Take one monitor event; True when the link has just lost its last peer."""
        if event & (zmq.EVENT_ACCEPTED | zmq.EVENT_CONNECTED):
            self.waiting.append(value)
        elif event == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            if self.waiting:
                self.live.add(self.waiting.pop(0))
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
    """One peer's links (its endpoints): the sockets, and a thread reading their monitors.

    `bind` and `connect` set a link up; `when_lost` names who is told, once, that the peer is gone
    (a subscriber that comes after the loss is told at once). A link's queued messages are dropped
    when it closes, unless `keep_linger`: a stage's last words to its head must still go out.
    Without `heartbeats`, a silent peer is found by TCP keepalive probes instead of ZMTP heartbeats
    (`KEEPALIVE_*`): vLLM's asyncio engine-core sockets, under CURVE, read a heartbeat as a message
    that is not there (`zmq.Again` out of a receive) and end the engine."""

    def __init__(
        self, name: str, endpoints: Sequence[str], *, keep_linger: bool = False, heartbeats: bool = True
    ) -> None:
        self.name = name
        self.endpoints = tuple(endpoints)
        self.keep_linger = keep_linger
        self.heartbeats = heartbeats
        self.sockets: dict[str, zmq.Socket[Any]] = {}
        self._monitors: list[tuple[zmq.Socket[Any], _Peers]] = []
        # The owner's thread adds monitors and subscribes while this watch's thread reads and reports.
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._lost: str | None = None  # why the links were lost, once they were
        self._subscriber: Callable[[str], None] | None = None
        self._thread: threading.Thread | None = None

    def bind(self, socket: zmq.Socket[Any], endpoint: str) -> None:
        """`socket.bind(endpoint)`, a watched link if `endpoint` is TCP."""
        self.before(socket, endpoint)
        socket.bind(endpoint)
        self.attach(socket, endpoint)

    def connect(self, socket: zmq.Socket[Any], endpoint: str) -> None:
        """`socket.connect(endpoint)`, a watched link if `endpoint` is TCP."""
        self.before(socket, endpoint)
        socket.connect(endpoint)
        self.attach(socket, endpoint)

    def before(self, socket: zmq.Socket[Any], endpoint: str) -> None:
        """What a link needs before it binds or connects (the owner's thread): its options, and its
        monitor, so that no event is missed (under load a connect completes, handshake included,
        before `connect` returns to this thread)."""
        if not _watched(endpoint):
            return
        if self.heartbeats:
            socket.setsockopt(zmq.HEARTBEAT_IVL, HEARTBEAT_IVL_MS)
            socket.setsockopt(zmq.HEARTBEAT_TIMEOUT, HEARTBEAT_TIMEOUT_MS)
            socket.setsockopt(zmq.HEARTBEAT_TTL, HEARTBEAT_TIMEOUT_MS)
        else:
            socket.setsockopt(zmq.TCP_KEEPALIVE, 1)
            socket.setsockopt(zmq.TCP_KEEPALIVE_IDLE, KEEPALIVE_IDLE_S)
            socket.setsockopt(zmq.TCP_KEEPALIVE_INTVL, KEEPALIVE_INTVL_S)
            socket.setsockopt(zmq.TCP_KEEPALIVE_CNT, KEEPALIVE_PROBES)
        if not self.keep_linger:
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

    def when_lost(self, subscriber: Callable[[str], None]) -> None:
        """`subscriber(reason)` is called once when the peer is gone (from the watch's thread, or here
        if it already is)."""
        with self._lock:
            self._subscriber = subscriber
            reason = self._lost
        if reason is not None:
            self._tell(subscriber, reason)

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
        with self._lock:
            if self._stop.is_set() or self._lost is not None:
                return
            self._lost = reason
            subscriber = self._subscriber
        _log.error("omni-errors: the links of %s are lost: %s", self.name, reason)
        if subscriber is not None:
            self._tell(subscriber, reason)

    def _tell(self, subscriber: Callable[[str], None], reason: str) -> None:
        try:
            subscriber(reason)
        except Exception:  # omni-errors: ignore[OE202]: logged; the watcher must survive its subscriber
            _log.exception("omni-errors: link-loss subscriber of %s failed", self.name)


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
    """The process manager a remote replica's client lacks: its links (`watch`) stand in for the
    process, so every reader of the manager (a health check, the sentinel thread) sees their state."""

    def __init__(self, watch: LinkWatch) -> None:
        self.proc = RemoteProcess()
        self.watch = watch
        self.manager_stopped = False
        watch.when_lost(lambda reason: self.proc.end())

    def shutdown(self, timeout: float | None = None) -> None:
        """The head lets the replica go: nothing of it runs here, so only the watch stops."""
        self.manager_stopped = True
        self.watch.stop()
        self.proc.end()

    def monitor_engine_liveness(self) -> None:
        """Return once the replica is gone or let go (vLLM's engine monitor thread calls it, as it does
        its process manager's: an LLM replica's client then marks its engine dead)."""
        while not self.manager_stopped and not connection.wait([self.proc.sentinel], timeout=1.0):
            pass


def head_links(endpoints: Sequence[str]) -> LinkWatch:
    """The watch of a remote stage process's links to its head, for the running task that serves them:
    when the head is gone or cut off, the process notes exit code 86 (`ExitCode.LINK_LOST`) in the
    fatal state and the task is cancelled, so its loop ends and the process exits with that code."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()

    def lost(reason: str) -> None:
        _log.critical("omni-errors: this stage lost its link to the head (%s); ending it", reason)
        fatal.note(ExitCode.LINK_LOST)
        if task is not None:
            loop.call_soon_threadsafe(task.cancel)

    watch = LinkWatch("proc", endpoints)
    watch.when_lost(lost)
    return watch
