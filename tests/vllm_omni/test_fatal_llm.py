"""Fatal failures of an LLM stage (vLLM's EngineCore in StageEngineCoreProc), plugin on: each ends the server
with the code of what the stage died of, every request answered with a record naming the stage.

The stage's EngineCore says what it died of before vLLM's bare dead signal (`engine_core`): an OOM,
by its type, is 81; a stage killed without a word stays 85; a stage whose step never returns ends
itself after its step deadline with 84. Each test starts its own one-stage server (the topology
does not matter here; the three-stage cases are `test_fatal_llm_pipeline.py`).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.chaos.scenarios.vllm_omni_llm import CHAT, LlmTarget
from omni_server import OmniServer, assert_clean_exit, error_of, llm_server

# A bound that only keeps a broken stop from hanging the suite on a loaded machine; the strict
# figures are the chaos report's (`omni-errors chaos --target vllm-omni llm-oom-on ...`).
EXIT_BOUND_S = 60


#: A hung stage's step deadline here: short, so that the case waits for the answers, not the deadline.
HANG_DEADLINE_S = 5.0


def _server(tmp_path: Path, step_deadline_s: float | None = None) -> OmniServer:
    return llm_server(tmp_path, LlmTarget(plugin=True, pipeline=CHAT, step_deadline_s=step_deadline_s))


@pytest.mark.parametrize(
    ("fault", "code"),
    [("oom", ExitCode.OOM), ("die", ExitCode.STAGE_LOST), ("hang", ExitCode.STAGE_HUNG)],
    ids=["oom-exits-81", "killed-exits-85", "hung-exits-84"],
)
def test_a_dead_llm_stage_answers_every_request_and_exits_with_its_code(
    tmp_path: Path, fault: str, code: ExitCode
) -> None:
    """A hung stage (a forward that never returns) ends itself after its step deadline
    (`OMNI_ERRORS_STEP_DEADLINE_S`), saying so: its requests are answered, not left waiting."""
    with _server(tmp_path, HANG_DEADLINE_S if fault == "hang" else None) as server:
        responses = server.chats_in_order(["hi [fault:slow]", f"hi [fault:{fault}]", "hi"], timeout=60)
        assert [r.status_code for r in responses] == [500, 500, 500], [r.text for r in responses]
        for response in responses:
            error = error_of(response)
            assert error["type"] == "InternalServerError"
            assert error["stage_id"] == 0
        assert "GiB" not in responses[1].text and "/home/" not in responses[1].text
        assert server.wait_exit(EXIT_BOUND_S) == code
        assert_clean_exit(server)


def test_an_output_the_api_process_cannot_read_ends_the_server_non_zero(tmp_path: Path) -> None:
    """vLLM-Omni's orchestrator re-raises an output it cannot decode and the released server exits 0
    after 15 s; with the plugin the request is answered with a record and the exit code says why."""
    with _server(tmp_path) as server:
        response = server.chat("hi [fault:unreadable]", timeout=60)
        assert response.status_code == 500
        assert error_of(response)["type"] == "InternalServerError"
        code = server.wait_exit(EXIT_BOUND_S)
        assert code not in (None, 0)
        assert_clean_exit(server)


def test_ctrl_c_with_the_llm_stage_busy_stops_every_process(tmp_path: Path) -> None:
    with _server(tmp_path) as server, ThreadPoolExecutor(1) as pool:
        answer = pool.submit(server.chat, "hi [fault:hold]", timeout=60)
        server.wait_for_fault()
        server.interrupt()
        assert server.wait_exit(EXIT_BOUND_S) is not None
        assert answer.result().status_code in (200, 500, 503)
        assert_clean_exit(server)
