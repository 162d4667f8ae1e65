"""A real uvicorn server on an ephemeral loopback port (127.0.0.1), stopped in the fixture's finalizer."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from prometheus_client import REGISTRY
from semantics_app import Server, build_app


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    # The instrumentator records nothing when its metric names are taken (it skips a duplicate
    # quietly), so an app instrumented earlier in this process would blind the metrics tests.
    if "http_requests" in {family.name for family in REGISTRY.collect()}:
        raise RuntimeError("an earlier test instrumented an app in this process: http_requests is registered")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(build_app(), log_level="warning", ws="websockets-sansio", lifespan="off")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, name="uvicorn-test", daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not uv.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        yield Server(f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}")
    finally:
        uv.should_exit = True
        thread.join(timeout=10)
        sock.close()
