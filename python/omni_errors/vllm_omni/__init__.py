"""omni-errors inside vLLM-Omni: a vLLM general plugin that carries the record across every hop.

Installing omni-errors into a vLLM-Omni environment enables it: vLLM loads the
`vllm.general_plugins` entry point `omni_errors = omni_errors.vllm_omni:register` in the API
process, StageDiffusionProc, EngineCore and diffusion workers. `OMNI_ERRORS_VLLM_OMNI=0`
disables it (vLLM's `VLLM_PLUGINS` allow-list works too). `docs/vllm-omni.md` lists every patch
beside the upstream change that would replace it.

`register()` is cheap and a no-op where it has nothing to do: without vLLM-Omni it returns after
one metadata lookup; with it, each patch waits until its module is imported (`hooks`), so a
process that never imports the orchestrator or the API server never pays for them. A vLLM-Omni
version the plugin does not know is refused whole, with one log line.
"""

from __future__ import annotations

import importlib.metadata
import logging
import os
import threading

__all__ = ["ENV_VAR", "SUPPORTED", "register", "status"]

_log = logging.getLogger("omni_errors.vllm_omni")

#: Set to 0 (or false/off/no) to disable the plugin in every process of the server.
ENV_VAR = "OMNI_ERRORS_VLLM_OMNI"
#: vLLM-Omni release series whose layout the patches were written and tested against.
SUPPORTED = ("0.30.",)

# module -> "package.module:function" of the patch applied right after it is imported
_PATCHES = {
    "vllm_omni.diffusion.data": "diffusion:patch_data",
    "vllm_omni.diffusion.executor.uniproc_executor": "diffusion:patch_uniproc_executor",
    "vllm_omni.diffusion.diffusion_engine": "diffusion:patch_engine",
    "vllm_omni.diffusion.stage_diffusion_proc": "diffusion:patch_proc",
    "vllm_omni.outputs": "client:patch_outputs",
    "vllm_omni.diffusion.stage_diffusion_client": "client:patch_diffusion_client",
    "vllm_omni.engine.orchestrator": "orchestrator:patch_orchestrator",
    "vllm_omni.entrypoints.omni_base": "api:patch_omni_base",
    "vllm_omni.entrypoints.async_omni_base": "api:patch_async_omni_base",
    "vllm_omni.entrypoints.async_omni": "api:patch_async_omni",
    "vllm_omni.entrypoints.openai.api_server": "api:patch_api_server",
    "vllm_omni.entrypoints.openai.serving_chat": "api:patch_chat",
    "vllm_omni.entrypoints.openai.video.generation.helpers": "api:patch_video",
    # connector tombstones (`connectors`): the serializer hook, SHM's zero-copy read, the transport
    "vllm_omni.distributed.omni_connectors.utils.serialization": "connectors:patch_serializer",
    "vllm_omni.distributed.omni_connectors.connectors.shm_connector": "connectors:patch_shm_connector",
    "vllm_omni.distributed.omni_connectors.model_runner.omni_connector_payload_transport": (
        "connectors:patch_payload_transport"
    ),
}

_lock = threading.Lock()
_status: str | None = None


def status() -> str | None:
    """What `register()` decided in this process: "enabled", "disabled", "absent", "refused", or None."""
    return _status


def _disabled() -> bool:
    return os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "off", "no")


def _decide() -> str:
    if _disabled():
        return "disabled"
    try:
        version = importlib.metadata.version("vllm-omni")
    except importlib.metadata.PackageNotFoundError:
        return "absent"
    if not version.startswith(SUPPORTED):
        _log.warning(
            "omni-errors: vllm-omni %s is not a version this plugin knows (supported: %s); "
            "nothing is patched, vLLM-Omni's own error handling applies",
            version,
            ", ".join(f"{s}x" for s in SUPPORTED),
        )
        return "refused"
    return "enabled"


def _hook(target: str) -> object:
    module_name, _, function = target.partition(":")

    def run(module: object) -> None:
        import importlib

        getattr(importlib.import_module(f"{__name__}.{module_name}"), function)(module)

    return run


def register() -> None:
    """The `vllm.general_plugins` entry point; idempotent (vLLM may load plugins more than once)."""
    global _status
    with _lock:
        if _status is not None:
            return
        _status = _decide()
        if _status != "enabled":
            return
    from omni_errors.vllm_omni.hooks import when_imported

    for module, target in _PATCHES.items():
        when_imported(module, _hook(target))  # type: ignore[arg-type]
