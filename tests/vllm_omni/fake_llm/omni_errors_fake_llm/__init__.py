"""Test-only vLLM plugin: LLM stages of vLLM-Omni on CPU, with faults chosen by the prompt.

Installed into the vLLM-Omni environment by `make build-omni` (never by `pip install omni-errors`).
It is inert unless `OMNI_FAKE_LLM=1`, so a process of the environment that is not a test server is
unaffected. What it brings, and nothing else:

- `executor.FakeLLMExecutor`, which a deploy yaml names as `distributed_executor_backend`: vLLM's
  real `EngineCore` runs in each stage's `StageEngineCoreProc`, over a worker without a model;
- the test pipelines (`pipelines.py`), registered in every process that loads vLLM's plugins;
- `model.model_dir` and `model.deploy_yaml`, which write the model folder and deploy yaml a test
  server starts from;
- a stage's own validation (`faults.install_validation`), which refuses a request whose prompt
  asks it to (the `client` fault).

Faults are requested by a marker in the prompt (`faults.py`); the plugin under test never sees
how they were chosen.
"""

from __future__ import annotations

import os


def register() -> None:
    """The `vllm.general_plugins` entry point."""
    if os.environ.get("OMNI_FAKE_LLM") != "1":
        return
    from omni_errors_fake_llm.faults import install_validation
    from omni_errors_fake_llm.pipelines import register as register_pipelines

    register_pipelines()
    install_validation()
