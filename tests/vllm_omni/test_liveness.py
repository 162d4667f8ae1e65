"""The plugin's path to the link watch on a release that does not call it (`omni_errors_vllm_omni.liveness`):
the endpoints it `expect`s, just before vLLM-Omni binds or connects them, are set up on their watch
by pyzmq's `bind` / `connect` (`before`, `after`), and no other socket is touched. The watch itself is
tested in tests/test_link_watch.py."""

from __future__ import annotations

from typing import Any

import zmq
from omni_errors import link_watch
from omni_errors.link_watch import LinkWatch
from omni_errors_tools.chaos.watch import free_port
from omni_errors_vllm_omni import liveness


def test_an_expected_endpoint_joins_its_watch_once_and_others_are_left_alone() -> None:
    ctx: zmq.Context[Any] = zmq.Context()
    expected, other = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    watch = LinkWatch("stage-0-replica-0", (expected,))
    sockets = [ctx.socket(zmq.PULL) for _ in range(3)]
    try:
        liveness.expect(watch)
        for sock, endpoint in zip(sockets, (expected, other), strict=False):
            liveness.before(sock, endpoint)  # what the plugin's `Socket.bind` does around the bind
            sock.bind(endpoint)
            liveness.after(sock, endpoint)
        assert watch.sockets == {expected: sockets[0]}
        assert sockets[0].getsockopt(zmq.HEARTBEAT_IVL) == link_watch.HEARTBEAT_IVL_MS
        assert sockets[1].getsockopt(zmq.HEARTBEAT_IVL) == 0
        liveness.before(sockets[2], expected)  # the endpoint was expected once: a second socket is not a link
        assert sockets[2].getsockopt(zmq.HEARTBEAT_IVL) == 0
    finally:
        watch.stop()
        for sock in sockets:
            sock.close(linger=0)
        ctx.term()
