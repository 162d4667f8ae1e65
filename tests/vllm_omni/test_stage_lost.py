"""Behaviour 2: the pipeline's only stage process dies (SIGKILL): before and after.

Each test starts its own server, because each ends it.
"""

from __future__ import annotations

from pathlib import Path

import httpx
from omni_errors.lifecycle.exitcodes import ExitCode
from omni_server import OmniServer, assert_clean_exit, error_of


def test_without_the_plugin_the_server_answers_500_forever_and_exits_0(tmp_path: Path) -> None:
    with OmniServer(tmp_path, plugin=False, subprocess_stage=True) as server:
        try:  # the request in flight when the stage died: vLLM-Omni 0.30 leaves it unanswered
            server.images("a cat [fault:die]", timeout=20)
        except httpx.ReadTimeout:
            pass
        for _ in range(3):
            assert server.images("a dog").status_code == 500
        assert server.proc is not None and server.proc.poll() is None
        server.interrupt()
        assert server.wait_exit(120) == 0


def test_with_the_plugin_the_server_exits_85(tmp_path: Path) -> None:
    with OmniServer(tmp_path, plugin=True, subprocess_stage=True) as server:
        response = server.images("a cat [fault:die]", timeout=30)
        assert response.status_code == 500
        assert error_of(response)["stage_id"] == 0
        assert server.wait_exit(10) == ExitCode.STAGE_LOST
        assert_clean_exit(server)
