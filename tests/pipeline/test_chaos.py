"""The chaos scenarios at CI size (scale 0.2: 200 streams for the vLLM PR scenario), each against
a fresh server. The full-scale run (`omni-errors chaos`) is documented in docs/tour.md."""

from __future__ import annotations

import asyncio

import pytest
from omni_errors.chaos.harness import run_scenario
from omni_errors.chaos.report import table
from omni_errors.chaos.scenarios import SCENARIOS


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_chaos_scenario(name: str) -> None:
    result = asyncio.run(
        run_scenario(
            SCENARIOS[name], scale=0.2, progress=False, deadline=60.0, startup_timeout=200.0, step_interval=0.01
        )
    )
    assert result.passed, table([result])
