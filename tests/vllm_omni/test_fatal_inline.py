"""A lost executor of the inline diffusion stage, with the plugin: the server exits 80, as it does with
the stage in StageDiffusionProc (`test_after_subprocess.py`, the same fault).

Its own server, because it ends it (the module server of `test_after_inline.py` ends with an OOM).
"""

from __future__ import annotations

from pathlib import Path

from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import DEAD_MESSAGE
from omni_server import OmniServer, assert_clean_exit, error_of


def test_lost_executor_answers_every_request_and_exits_80(tmp_path: Path) -> None:
    """The executor reports its loss (its failure callbacks) before the request in flight fails, as
    vLLM-Omni's worker monitor does, so the orchestrator judges the replica dead first: the exit code
    is the executor's report (80), not "died without reporting" (85)."""
    with OmniServer(tmp_path, plugin=True, subprocess_stage=False) as server:
        responses = server.in_order(["a dog [fault:slow]", "a cat [fault:fatal]", "a bird", "a fish"], timeout=30)
        assert [r.status_code for r in responses] == [200, 500, 500, 500]
        assert all(error_of(r)["message"] == DEAD_MESSAGE for r in responses[1:])
        assert server.wait_exit(30) == ExitCode.FATAL_ENGINE
        assert_clean_exit(server)
