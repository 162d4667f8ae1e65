"""Fatal failures of StageDiffusionProc with the plugin: OOM exits 81; Ctrl+C always ends the server.

Each test starts its own server, because each ends it.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from omni_errors.lifecycle.exitcodes import ExitCode
from omni_server import OmniServer, assert_clean_exit, error_of


def test_oom_in_the_proc_answers_every_request_and_exits_81(tmp_path: Path) -> None:
    with OmniServer(tmp_path, plugin=True, subprocess_stage=True) as server:
        responses = server.in_order(["a dog [fault:slow]", "a cat [fault:oom]", "a bird"], timeout=30)
        assert [r.status_code for r in responses] == [200, 500, 500]
        assert all(error_of(r)["type"] == "InternalServerError" for r in responses[1:])
        assert "GiB" not in responses[1].text
        assert server.wait_exit(10) == ExitCode.OOM
        assert_clean_exit(server)


def test_ctrl_c_ends_a_busy_server_within_3_s(tmp_path: Path) -> None:
    with OmniServer(tmp_path, plugin=True, subprocess_stage=True) as server:
        with ThreadPoolExecutor(1) as pool:
            pool.submit(server.images, "a cat [fault:hold]", timeout=30)
            deadline = time.monotonic() + 60
            while not server.marker.exists():  # until the stage is busy with the request
                assert time.monotonic() < deadline, "the request never reached the stage"
                time.sleep(0.05)
            server.interrupt()
            assert server.wait_exit(3) is not None
        assert_clean_exit(server)
