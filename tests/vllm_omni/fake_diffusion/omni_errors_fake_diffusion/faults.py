"""Faults the fake executor injects, chosen by a `[fault:NAME]` marker in the request's prompt.

The exception types and texts are the real ones a GPU stage produces (torch's OOM message with
its allocation figures and pid, a checkpoint path under a home directory, vLLM-Omni's guardrail
error), so what the client sees is what it would see from a real stage.
"""

from __future__ import annotations

import os
import re
import time

__all__ = ["CONTROL_FAULT_FILE", "FAULTS", "control_fails", "fault_of", "mark", "raise_fault"]

#: File the fake appends `<unix time> <stage> <fault>` to when a fault fires (the chaos harness's marker).
MARKER_ENV = "OMNI_FAKE_DIFFUSION_MARKER"

_MARKER = re.compile(r"\[fault:([a-z-]+)\]")

OOM_TEXT = (
    "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.15 GiB of which "
    "3.12 GiB is free. Process {pid} has 76.02 GiB memory in use. Of the allocated memory 74.50 GiB is "
    "allocated by PyTorch, and 1.02 GiB is reserved by PyTorch but unallocated."
)
PATH_TEXT = (
    "size mismatch for transformer_blocks.0.attn.to_q.weight: copying a param with shape [1536, 1536] from "
    "/home/alice/.cache/huggingface/hub/models--stabilityai--sd3/snapshots/3e1f/transformer/"
    "diffusion_pytorch_model.safetensors"
)

#: name -> what happens
FAULTS = {
    "oom": "torch.OutOfMemoryError in the worker (per-request in vLLM-Omni 0.30; fatal by type)",
    "oom-wrapped": "RuntimeError wrapping a torch.OutOfMemoryError (a library's wrapper; seed 003)",
    "fatal": "the executor dies (a worker process lost): the failure callbacks fire, then EngineDeadError from execute",
    "value": "ValueError with a checkpoint path in the worker (internal: never a client error)",
    "guardrail": "vLLM-Omni's OmniClientError 422 from a content guardrail",
    "slow": "takes 2 s (keeps the request in flight while another one fails)",
    "hold": "takes 3 s and marks the moment it starts (something to interrupt with Ctrl+C)",
    "die": "the stage process is SIGKILLed (a segfault, the OOM killer): only in the subprocess mode",
    "freeze": "the stage process is SIGSTOPped: silent on every link, as a host cut off the network looks",
}


#: Beside the marker file: a file of that name holding "sleep" or "wake" makes that control call's ack
#: an error (a worker that failed to offload or restore), until the test removes it.
CONTROL_FAULT_FILE = "control-fault"


def control_fails(call: str) -> bool:
    """Whether the test asked the worker's `call` ("sleep" or "wake") to fail."""
    path = os.environ.get(MARKER_ENV)
    if not path:
        return False
    try:
        with open(os.path.join(os.path.dirname(path), CONTROL_FAULT_FILE), encoding="utf-8") as fault:
            return fault.read().strip() == call
    except OSError:
        return False


def mark(name: str) -> None:
    """Note that fault `name` fired, for whoever times what follows."""
    path = os.environ.get(MARKER_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as marker:
            marker.write(f"{time.time():.6f} 0 {name}\n")


def fault_of(prompt: object) -> str | None:
    """The fault named in `prompt` (a string, or a dict/list holding one), if any."""
    match = _MARKER.search(str(prompt))
    return match.group(1) if match else None


def raise_fault(name: str) -> None:
    """Raise the per-request fault `name` ("fatal" is the executor's own: see engine.py)."""
    import torch

    if name != "slow":
        mark(name)
    if name in ("die", "freeze"):
        import signal

        os.kill(os.getpid(), signal.SIGKILL if name == "die" else signal.SIGSTOP)
    if name == "oom":
        raise torch.OutOfMemoryError(OOM_TEXT.format(pid=os.getpid()))
    if name == "oom-wrapped":
        try:
            raise torch.OutOfMemoryError(OOM_TEXT.format(pid=os.getpid()))
        except torch.OutOfMemoryError as exc:
            raise RuntimeError(f"Diffusion generation failed: {exc}") from exc
    if name == "value":
        raise ValueError(PATH_TEXT)
    if name == "guardrail":
        from vllm_omni.errors import OmniClientError

        raise OmniClientError(
            "The prompt was rejected by the content guardrail", status_code=422, error_type="UnprocessableEntityError"
        )
    if name == "slow":
        time.sleep(2.0)
    if name == "hold":
        time.sleep(3.0)
