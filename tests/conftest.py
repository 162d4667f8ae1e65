"""Shared test configuration: `tests/` is importable so helpers like reference_decoder load by name, and
the processes the tests start run as on a machine without a GPU."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

# Every process the tests start inherits this: no GPU here, so none of vLLM's background CUDA
# kernel builds (`omni_errors_tools.chaos.scenarios.vllm_omni.CPU_ONLY` says why).
os.environ.setdefault("HUMMING_DISABLE_PARALLEL_BUILD", "1")
