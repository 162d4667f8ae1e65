"""The reference pipeline's chaos scenarios (its remote ones included) at CI size (scale 0.2: 200
streams for the vLLM PR scenario), each against a fresh server. The full-scale run
(`omni-errors chaos`) is documented in docs/tour.md; the `vllm-omni` target's scenarios need the
vLLM-Omni environment and are run by `omni-errors chaos --target vllm-omni` (docs/vllm-omni.md)."""

from __future__ import annotations

import asyncio

import pytest
from omni_errors_tools.chaos.harness import run_scenario
from omni_errors_tools.chaos.report import table
from omni_errors_tools.chaos.scenarios import of_target

PIPELINE = {scenario.name: scenario for scenario in of_target("pipeline")}


@pytest.mark.parametrize("name", list(PIPELINE))
def test_chaos_scenario(name: str) -> None:
    result = asyncio.run(
        run_scenario(
            PIPELINE[name], scale=0.2, progress=False, deadline=60.0, startup_timeout=200.0, step_interval=0.01
        )
    )
    assert result.passed, table([result])
