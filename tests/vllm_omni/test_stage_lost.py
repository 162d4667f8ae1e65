"""Behaviour 2: the pipeline's only stage process dies (SIGKILL): before and after.

Each test starts its own server, because each ends it.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from omni_errors.fatal.exitcodes import ExitCode
from omni_server import OmniServer, assert_clean_exit, error_of


def _answer_status(server: OmniServer, prompt: str, timeout: float) -> int | None:
    """The status of an image request, or None when no answer came within `timeout`."""
    try:
        return server.images(prompt, timeout=timeout).status_code
    except httpx.ReadTimeout:
        return None


def test_without_the_plugin_the_server_never_recovers_and_exits_0(tmp_path: Path) -> None:
    with OmniServer(tmp_path, plugin=False, subprocess_stage=True) as server:
        # vLLM-Omni 0.30 leaves the request in flight when the stage died unanswered, and answers
        # the later ones with a 500 or not at all (both seen on this server): never with an image.
        assert _answer_status(server, "a cat [fault:die]", 20) in (500, None)
        later = [_answer_status(server, "a dog", 20) for _ in range(3)]
        assert all(status in (500, None) for status in later), later
        assert server.proc is not None and server.proc.poll() is None
        server.interrupt()
        assert server.wait_exit(120) == 0


def test_with_the_plugin_the_server_exits_85(tmp_path: Path) -> None:
    with OmniServer(tmp_path, plugin=True, subprocess_stage=True) as server:
        response = server.images("a cat [fault:die]", timeout=30)
        assert response.status_code == 500
        assert error_of(response)["stage_id"] == 0
        assert server.wait_exit(30) == ExitCode.STAGE_LOST
        assert_clean_exit(server)
