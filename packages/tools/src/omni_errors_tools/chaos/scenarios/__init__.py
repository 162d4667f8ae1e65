"""The scenario table: every target's scenarios, by name.

Each module here holds one target and its scenarios (`pipeline`: the reference server; `remote`:
the same server with a stage on a second host, so its scenarios share the `pipeline` target's
run and table; `vllm_omni`: the real `vllm-omni serve`, with the plugin off and on;
`vllm_omni_llm`: the same server over LLM stages (vLLM's EngineCore in each stage process);
`vllm_omni_multinode`: its multi-node mode, a head and a headless stage, in the same table). A new target
adds its module and one entry to `_TABLES`; the harness and the CLI read only `SCENARIOS`.
Scenario modules import nothing heavy: loads build their requests when they run.
"""

from __future__ import annotations

from collections.abc import Iterable

from omni_errors_tools.chaos.scenario import Scenario
from omni_errors_tools.chaos.scenarios import pipeline, remote, vllm_omni, vllm_omni_llm, vllm_omni_multinode
from omni_errors_tools.chaos.target import Target

__all__ = ["SCENARIOS", "TARGETS", "of_target"]

_TABLES: tuple[Iterable[Scenario], ...] = (
    pipeline.SCENARIOS,
    remote.SCENARIOS,
    vllm_omni.SCENARIOS,
    vllm_omni_llm.SCENARIOS,
    vllm_omni_multinode.SCENARIOS,
)


def _index(tables: Iterable[Iterable[Scenario]]) -> dict[str, Scenario]:
    index: dict[str, Scenario] = {}
    for table in tables:
        for scenario in table:
            if scenario.name in index:
                why = f"two chaos scenarios are named {scenario.name!r}"
                raise ValueError(why)  # omni-errors: ignore[OE101]: a defect in the scenario table, raised at import
            index[scenario.name] = scenario
    return index


SCENARIOS: dict[str, Scenario] = _index(_TABLES)
"""Every scenario, by its unique name, in table order."""

TARGETS: dict[str, Target] = {s.target.name: s.target for s in SCENARIOS.values()}
"""Every target a scenario runs against, by name."""


def of_target(target: str) -> list[Scenario]:
    """The scenarios that run against `target`, in table order."""
    return [s for s in SCENARIOS.values() if s.target.name == target]
