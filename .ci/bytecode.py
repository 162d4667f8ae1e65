#!/usr/bin/env python3
"""Write the bytecode cache of what the suites import, once, before they start side by side.

    bytecode.py venv    in .venv (vLLM 0.33): what the `.venv` suites' processes import
    bytecode.py omni    in .venv-omni (vLLM 0.30 + vllm-omni 0.30): what a `vllm-omni serve --omni`
                        start (its API and stage processes) and the vLLM-Omni suites import

A fresh environment holds no bytecode. The first process that imports a module compiles it and
writes the cache; a process that starts before the cache is written compiles it again. The suites
start together, each with its first servers: on a clean clone about ten processes compiled torch,
vLLM and vLLM-Omni at once (a server start: 79 s of CPU with nothing cached, 38 s with the cache).
One import of the same modules here writes the cache they all read. A module left out is only
compiled by its first importer, as before: the lists cover the bulk, not every module.
"""

from __future__ import annotations

import importlib
import sys
import time

# Test tools and the project's own modules: both environments.
COMMON = (
    "pytest",
    "hypothesis",
    "schemathesis",
    "httpx",
    "openai",
    "uvicorn",
    "torch",
    "omni_errors_cli",
    "omni_errors_tools.chaos.scenarios.pipeline",
    "omni_errors_tools.chaos.scenarios.remote",
    "omni_errors_tools.lifecycle.supervisor",
    "omni_errors_tools.pipeline.app",
    "omni_errors.server",
)
MODULES = {
    "venv": (
        *COMMON,
        "torch._inductor.exc",
        "vllm.entrypoints.openai.api_server",
        "vllm.v1.engine.exceptions",
        "vllm.distributed.device_communicators.shm_broadcast",
    ),
    "omni": (
        *COMMON,
        # The CLI (`vllm-omni serve`) and the API server process.
        "vllm_omni.entrypoints.cli.main",
        "vllm_omni.entrypoints.cli.benchmark.main",
        "vllm_omni.entrypoints.openai.api_server",
        # The diffusion stage process: the fake engine and the pipeline module it loads (flashinfer,
        # cache-dit and the CUTLASS DSL come with it: 500 files).
        "vllm_omni.diffusion.stage_diffusion_proc",
        "vllm_omni.diffusion.stage_diffusion_client",
        "vllm_omni.diffusion.models.sd3.pipeline_sd3",
        "omni_errors_fake_diffusion.engine",
        # The plugin and the multi-node harness.
        "omni_errors_vllm_omni",
        "omni_errors_vllm_omni.api",
        "omni_errors_vllm_omni.diffusion",
        "omni_errors_vllm_omni.hooks",
        "omni_errors_tools.chaos.scenarios.vllm_omni_multinode",
    ),
}


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0] not in MODULES:
        print(__doc__, file=sys.stderr)
        return 2
    if sys.dont_write_bytecode:
        print("bytecode.py: PYTHONDONTWRITEBYTECODE is set, so nothing would be cached", file=sys.stderr)
        return 2
    began = time.monotonic()
    before = len(sys.modules)
    for name in MODULES[argv[0]]:
        importlib.import_module(name)
    print(
        f"bytecode ({argv[0]}): {len(sys.modules) - before} modules imported and cached "
        f"in {time.monotonic() - began:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
