"""What the plugin adds to vLLM-Omni's models object: a model the diffusion server does not serve
gets vLLM's 404 naming the model (`make_serving_models_getattr`, a manifest target), not a 500
quoting a private class. The routes' own failures are the core's (`omni_errors.server.route_errors`).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

__all__ = ["make_serving_models_getattr"]


def make_serving_models_getattr(module: ModuleType, original: Any) -> Any:
    """`_DiffusionServingModels.__getattr__`: a diffusion server loads no LoRA adapter, so its
    `lora_requests` is empty, as vLLM's `OpenAIServingModels` without adapters has it. vLLM's
    `_check_model` looks there for a model name the server does not serve; vLLM-Omni's fallback
    answers every missing attribute with an `_Unsupported` object instead, and the membership test
    fails as a 500 quoting that private class. With it, vLLM's own 404 naming the model."""

    def __getattr__(self: Any, name: str) -> Any:
        if name == "lora_requests":
            return {}
        return original(self, name)

    return __getattr__
