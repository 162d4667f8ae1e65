"""Faults of an LLM stage, chosen by a `[fault:NAME]` or `[fault:NAME@STAGE]` marker in the prompt.

A marker without a stage is stage 0's. A stage answers with the markers of later stages (the
executor's answer), so a marker reaches the stage it names through vLLM-Omni's own stage-input
path, as a real thinker's tokens reach its talker. The exception types and texts are the real
ones a GPU stage produces (the seed's `InductorError`, torch's OOM with its allocation figures).
"""

from __future__ import annotations

import os
import re
import signal
import time

import torch
from omni_errors_fake_diffusion.faults import OOM_TEXT

__all__ = [
    "FAULTS",
    "MARKER_ENV",
    "before_step",
    "forwarded",
    "install_validation",
    "mark",
    "stage_faults",
    "unreadable",
]

#: File the fake appends `<unix time> <stage> <fault>` to when a fault fires (what a test waits for).
MARKER_ENV = "OMNI_FAKE_LLM_MARKER"

_MARKER = re.compile(r"\[fault:([a-z-]+)(?:@(\d+))?\]")

#: name -> what happens, in the stage the marker names
FAULTS = {
    "fatal": "the forward raises torch's InductorError (seed 001): the stage's EngineCore dies",
    "oom": "the forward raises torch.OutOfMemoryError (seed 003): the stage's EngineCore dies",
    "slow": "the first step takes 2 s (keeps the request in flight while another one fails)",
    "hold": "the first step takes 3 s and marks the moment it starts (something to interrupt)",
    "hang": "the forward never returns (a hung stage; the process lives on)",
    "die": "the stage process is SIGKILLed (a segfault, the kernel's OOM killer): no word is said",
    "unreadable": "the stage's output is one the API process cannot decode (vLLM-Omni's orchestrator re-raises)",
    "client": "the stage's own validation refuses the request while preparing it (VLLMValidationError, 400, "
    "parameter `voice`)",
}
#: How long a hung forward waits: longer than any test, bounded all the same.
HANG_S = 3600.0


def _markers(text: str) -> list[tuple[str, int]]:
    return [(m.group(1), int(m.group(2) or 0)) for m in _MARKER.finditer(text)]


def stage_faults(text: str, stage_id: int) -> list[str]:
    """The faults `text` names for stage `stage_id`."""
    return [name for name, stage in _markers(text) if stage == stage_id]


def forwarded(text: str, stage_id: int) -> str:
    """The markers of `text` for stages after `stage_id`, as the stage's answer carries them on."""
    return "".join(f"[fault:{name}@{stage}]" for name, stage in _markers(text) if stage > stage_id)


def mark(name: str, stage_id: int) -> None:
    """Note that fault `name` fired in stage `stage_id`, for whoever times what follows."""
    path = os.environ.get(MARKER_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as marker:
            marker.write(f"{time.time():.6f} {stage_id} {name}\n")


def before_step(faults: list[str], fired: set[str], stage_id: int) -> None:
    """Fire the request's faults in the forward of stage `stage_id` (each delay once per request)."""
    for name in faults:
        if name == "fatal":
            mark(name, stage_id)
            from torch._inductor.exc import InductorError

            raise InductorError(RuntimeError("Triton compilation failed: kernel triton_poi_fused_0"), None)
        if name == "oom":
            mark(name, stage_id)
            raise torch.OutOfMemoryError(OOM_TEXT.format(pid=os.getpid()))
        if name == "die":
            mark(name, stage_id)
            os.kill(os.getpid(), signal.SIGKILL)
        if name == "hang":
            mark(name, stage_id)
            time.sleep(HANG_S)
        if name in ("slow", "hold") and name not in fired:
            fired.add(name)
            if name == "hold":
                mark(name, stage_id)
            time.sleep(2.0 if name == "slow" else 3.0)


def unreadable() -> dict[str, object]:
    """An output the stage can send and the API process cannot decode: vLLM-Omni declares
    `multimodal_output` as `dict[str, torch.Tensor]`, and this holds no tensor."""
    return {"audio": "not a tensor"}


def install_validation() -> None:
    """A stage's own validation, where vLLM runs it: `StageEngineCoreProc.preprocess_add_request`, in
    the engine core's input thread (vLLM answers a request it raises for with `FinishReason.ERROR`)."""
    from pathlib import Path

    from tokenizers import Tokenizer
    from vllm.exceptions import VLLMValidationError
    from vllm_omni.engine.stage_engine_core_proc import StageEngineCoreProc

    prepare = StageEngineCoreProc.preprocess_add_request
    tokenizers: dict[str, Tokenizer] = {}

    def preprocess_add_request(self: StageEngineCoreProc, request: object) -> object:
        model = self.vllm_config.model_config
        folder = str(model.tokenizer or model.model)
        if folder not in tokenizers:
            tokenizers[folder] = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
        text = tokenizers[folder].decode(list(getattr(request, "prompt_token_ids", None) or []))
        if "client" in stage_faults(text, int(getattr(model, "stage_id", 0) or 0)):
            raise VLLMValidationError("This stage has no voice named 'alloy'", parameter="voice", value="alloy")
        return prepare(self, request)

    StageEngineCoreProc.preprocess_add_request = preprocess_add_request  # type: ignore[method-assign]
