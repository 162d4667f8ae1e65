"""Test-only vLLM plugin: a CPU diffusion executor for vLLM-Omni, with faults chosen by the prompt.

Installed into the vLLM-Omni environment by `make setup-omni` (never by `pip install omni-errors`).
It is inert unless `OMNI_FAKE_DIFFUSION=1`, so a process of the environment that is not a test
server is unaffected. What it replaces, and nothing else:

- `DiffusionEngine.make_engine` builds vLLM-Omni's real `DiffusionEngine` with `FakeExecutor`
  (this package) instead of a GPU executor;
- `OmniDiffusionConfig.enrich_config` is a no-op (no Hugging Face download);
- with `OMNI_FAKE_DIFFUSION_MODE=subprocess`, a single diffusion stage runs in vLLM-Omni's
  `StageDiffusionProc` (the ZMQ hop) instead of the inline client.

Faults are requested by a marker in the prompt (`faults.py`); the plugin under test never sees
how they were chosen.
"""

from __future__ import annotations

import os


def register() -> None:
    """The `vllm.general_plugins` entry point."""
    if os.environ.get("OMNI_FAKE_DIFFUSION") != "1":
        return
    from omni_errors_fake_diffusion.engine import install

    install()
