"""Fault injection for demos and tests: off unless the server is started with a fault flag.

A fault is a kind, the stage it fires in and the step it fires at:

| kind | where | effect |
|---|---|---|
| `validation` | API process | the request is rejected: 400 `VLLMValidationError` naming `omni_fault` |
| `stage_error` | stage | a non-fatal failure of the request(s): 500 with the stage id; the stage keeps serving |
| `fatal` | stage | an exception escapes the engine's `step()`: the pipeline dies (exit 80) |
| `oom` | stage | `torch.OutOfMemoryError` (typed, seed 003): the pipeline dies (exit 81) |
| `inductor` | stage | torch's `InductorError` (seed 001): the pipeline dies (exit 80) |
| `startup` | stage (process only) | the engine's constructor raises: the server never serves (exit 82) |
| `hang` | stage | `step()` never returns (a stuck kernel): heartbeat timeout, 504 then exit 84 |
| `sigkill` | stage | the stage process SIGKILLs itself: exit 85 |

Per process: `--fault KIND --fault-stage S --fault-after N` (N engine steps of stage S).
Per request (only with `--allow-request-faults`): the header `X-Omni-Fault: KIND[;stage=S][;after=N]`
or the body field `"omni_fault": {"kind": KIND, "stage": S, "after": N}` (N steps of that request in
stage S). Without the flag a request asking for a fault is rejected with 400.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["PROCESS_KINDS", "REQUEST_KINDS", "FaultSpec", "fire", "parse_header"]

REQUEST_KINDS = ("validation", "stage_error", "fatal", "oom", "inductor", "hang", "sigkill")
PROCESS_KINDS = ("stage_error", "fatal", "oom", "inductor", "startup", "hang", "sigkill")
NUM_STAGES = 3


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    stage: int = 0
    after: int = 0

    def __post_init__(self) -> None:
        if self.kind not in (*REQUEST_KINDS, *PROCESS_KINDS):
            raise ValueError(
                f"unknown fault kind {self.kind!r}; expected one of {sorted({*REQUEST_KINDS, *PROCESS_KINDS})}"
            )
        if not 0 <= self.stage < NUM_STAGES:
            raise ValueError(f"fault stage {self.stage} out of range 0..{NUM_STAGES - 1}")
        if self.after < 0:
            raise ValueError(f"fault step {self.after} must be >= 0")

    def as_payload(self) -> dict[str, Any]:
        return {"kind": self.kind, "stage": self.stage, "after": self.after}


def parse_header(value: str) -> FaultSpec:
    """`KIND[;stage=S][;after=N]` -> FaultSpec; ValueError says what is wrong."""
    kind, *options = (part.strip() for part in value.split(";"))
    fields: dict[str, int] = {}
    for option in options:
        key, sep, raw = option.partition("=")
        if not sep or key not in ("stage", "after") or not raw.strip().isdigit():
            raise ValueError(f"bad fault option {option!r}; expected stage=S or after=N")
        fields[key] = int(raw)
    return FaultSpec(kind, **fields)


def _mark(marker: str | None, stage_id: int, kind: str) -> None:
    """Record when the fault fired, so a harness can time failure-to-answer from that moment."""
    if marker:
        with open(marker, "a") as f:
            f.write(f"{time.time()!r} {stage_id} {kind}\n")


def fire(kind: str, stage_id: int, marker: str | None = None) -> BaseException | None:
    """Inside a stage: do the fault. Returns the exception for the caller to raise or to report as
    the request's failure (`stage_error`); `hang` and `sigkill` do not return."""
    if kind == "inductor":  # load the compiler first (seconds); an engine that compiles has it loaded
        import torch._inductor.exc
    _mark(marker, stage_id, kind)
    if kind == "stage_error":
        return RuntimeError(f"stage {stage_id} could not process this request (injected stage_error)")
    if kind == "fatal":
        return RuntimeError(f"illegal memory access in stage {stage_id} (injected fatal engine error)")
    if kind == "oom":
        import torch

        return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
    if kind == "inductor":
        from torch._inductor.exc import InductorError

        return InductorError(AssertionError("'XBLOCK' too large. Maximum: 4096. Actual: 8192"), None)
    if kind == "startup":
        return RuntimeError(f"stage {stage_id}: weights not found at /models/missing/model.safetensors (injected)")
    if kind == "hang":
        while True:  # a stuck kernel: no heartbeat, deaf to SIGTERM; only SIGKILL ends it
            time.sleep(0.05)
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)  # pragma: no cover - the kernel delivers SIGKILL first
    raise ValueError(f"fault kind {kind!r} cannot fire in a stage")
