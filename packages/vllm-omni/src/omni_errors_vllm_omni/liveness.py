"""Which of vLLM-Omni's sockets are a remote replica's links, on a release that does not watch them.

The watch itself is the core's (`omni_errors.link_watch`): vLLM-Omni's own client and proc call it
once the upstream series is in. On vLLM-Omni 0.30 the sockets are created and bound or connected
inside `StageDiffusionClient._connect_transport` and `StageDiffusionProc.run_loop`, so the plugin
`expect`s a replica's two addresses just before vLLM-Omni binds or connects them, and `sockets`
(pyzmq's `bind` / `connect`) hands each matching socket here: `before` sets the link up on its
watch, `after` collects it.
"""

from __future__ import annotations

import threading
from typing import Any

import zmq
from omni_errors.link_watch import LinkWatch

__all__ = ["after", "before", "expect"]

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
