"""The targets whose patched code runs in the headless launcher of a remote host's replicas (`vllm-omni
serve --headless`), in the order they apply.
"""

from __future__ import annotations

from omni_errors_vllm_omni.manifest.model import Hop, Kind, Process, Target
from omni_errors_vllm_omni.manifest.names import (
    RELEASE as _R030,
    RELEASE_BEFORE_34 as _R030_BEFORE_34,
)

__all__ = ["TARGETS"]

# fmt: off
TARGETS: tuple[Target, ...] = (
    Target("vllm_omni.engine.stage_engine_startup", None, "wait_for_diffusion_manager_liveness",
           "distributed:make_wait_for_diffusion_replicas", Kind.REPLACE, {_R030: "047139995bdeec4d"},
           upstreamed={_R030: "24306a0cd17fb8b4", _R030_BEFORE_34: "5533f8e0017a41bc"},
           process=Process.LAUNCHER, hop=Hop.EXIT,
           does="the headless launcher reaps its replica before it reads the exit code (vLLM-Omni reads it first "
                "and exits 0 or 1 at random) and exits with the replica's documented code (80, 81, 86; 85 for a "
                "signal)",
           upstream="the launcher joins the replica and exits with its code"),
    Target("vllm_omni.engine.stage_engine_startup", None, "launch_headless_replica_group",
           "distributed:make_headless_replica_group", Kind.WRAP, {_R030: "197137bb35e935e6"},
           upstreamed={_R030: "0a51b746f16df9fb"},
           upstreamed_at="vllm_omni.engine.stage_engine_startup:launch_headless_llm_replicas",
           relies_on=("vllm_omni.engine.stage_engine_core_proc_manager:StageEngineCoreProcManager.processes",),
           process=Process.LAUNCHER, hop=Hop.EXIT,
           does="an LLM stage's headless launcher, which waited with `wait_for_manager_liveness` and exited 0 "
                "whatever its replica ended with, reaps the replica and exits with its documented code (80, 81, "
                "86; 85 for a signal), as a diffusion stage's does",
           upstream="`launch_headless_llm_replicas` waits with `wait_for_llm_manager_liveness`, which ends the "
                    "launcher with its replica's code"),
)
# fmt: on
