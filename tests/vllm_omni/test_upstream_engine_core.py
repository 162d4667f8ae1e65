"""The series against the plugin, an LLM stage's engine core (`omni_errors_vllm_omni.engine_core`):
what it died of, and a refused request; the release with the plugin and the series' tree without
it give the same (`upstream_probe`).
"""

from __future__ import annotations

import pytest
from upstream_probe import probe_report

_LLM_TARGETS = (
    "StageEngineCoreProc._send_engine_dead",
    "StageEngineCoreProc._handle_request_preproc_error",
    "StageEngineCoreProc.shutdown",
    "OmniEngineCoreOutputs",
    "StageEngineCoreClientBase.__init__",
)


@pytest.mark.parametrize("tree", ["release", "series"])
def test_an_llm_stage_says_what_it_died_of_on_both_trees(tree: str, request: pytest.FixtureRequest) -> None:
    """An LLM stage's engine core that dies sends the record it dies of and its exit code (81 for an
    OOM by type, 80 for anything else) before vLLM's dead signal, and notes the code in its process;
    a request it refuses while preparing it is answered with its record (400, `parameter`) and its
    text as `stop_reason`. The plugin's wraps on the release, vLLM-Omni's own on the series (patch 32)."""
    report = probe_report(tree, request)
    patched = {key.partition(":")[2] for key in report["patched"]} & set(_LLM_TARGETS)
    assert patched == (set(_LLM_TARGETS) if tree == "release" else set())
    llm = report["llm_stage"]
    assert llm["oom"] == [500, True, 81, "ENGINE_CORE_DEAD", 81]
    assert llm["anything else"] == [500, True, 80, "ENGINE_CORE_DEAD", 80]
    assert llm["refused"] == ["r1", "ERROR", "no voice named 'alloy'", 400, "voice", ["r1"]]
    if tree == "series":
        assert llm == request.getfixturevalue("on_the_release")["llm_stage"]
