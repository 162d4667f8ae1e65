"""The session's `omni-errors serve` (`pipeline_server`), shared by the tests and always stopped in the
finalizer, which also asserts that nothing of it is left behind."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest
from pipeline_server import Server, start_server, stop_server


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    srv = start_server("--allow-request-faults", "--step-interval", "0.005")
    try:
        yield srv
    finally:
        code = stop_server(srv)
        assert code == 128 + signal.SIGTERM, f"exit code {code}; log {srv.log}"
