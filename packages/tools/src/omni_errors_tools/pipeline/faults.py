"""Fault injection, the project's one family: off unless a server or a test engine asks for it.

A fault is a kind, the stage it fires in and the step it fires at:

| kind | where | effect |
|---|---|---|
| `validation` | API process (request only) | the request is rejected: 400 `VLLMValidationError` naming `omni_fault` |
| `stage_error` | stage | a non-fatal `RuntimeError` fails the request(s): 500 with the stage id; the stage serves on |
| `value_error` | stage (request only) | a non-fatal raw `ValueError` fails the request: 500 (a stage's raw error) |
| `fatal` | stage | an exception escapes the engine's `step()`: the pipeline dies (exit 80) |
| `oom` | stage | `torch.OutOfMemoryError` (typed, seed 003): the pipeline dies (exit 81) |
| `oom_wrapped` | stage | the OOM wrapped in a `RuntimeError` by a library (seed 003): still exit 81 |
| `inductor` | stage | torch's `InductorError` (seed 001): the pipeline dies (exit 80) |
| `alloc` | stage (process only) | a real CPU allocation beyond `RLIMIT_AS`: torch's plain `RuntimeError`, exit 80 |
| `startup` | stage (process only) | the engine's constructor raises: the server never serves (exit 82) |
| `hang` | stage | `step()` never returns (a stuck kernel): heartbeat timeout, 504 then exit 84 |
| `sigkill` | stage | the stage process SIGKILLs itself: exit 85 |

Per process: `--fault KIND --fault-stage S --fault-after N` (N engine steps of stage S).
Per request (only with `--allow-request-faults`): the header `X-Omni-Fault: KIND[;stage=S][;after=N]`
or the body field `"omni_fault": {"kind": KIND, "stage": S, "after": N}` (N steps of that request in
stage S). Without the flag a request asking for a fault is rejected with 400.

An engine drives its faults through `StageFaults`; each firing appends `<unix time> <stage> <kind>`
to the marker file, so a harness times failure-to-answer from the moment of failure.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_errors_tools.lifecycle.engine import RequestFailure

__all__ = [
    "NON_FATAL_KINDS",
    "PROCESS_KINDS",
    "REQUEST_KINDS",
    "FaultSpec",
    "StageFaults",
    "fire",
    "first_fault_time",
    "parse_header",
]

REQUEST_KINDS = (
    "validation",
    "stage_error",
    "value_error",
    "fatal",
    "oom",
    "oom_wrapped",
    "inductor",
    "hang",
    "sigkill",
)
PROCESS_KINDS = ("stage_error", "fatal", "oom", "oom_wrapped", "inductor", "alloc", "startup", "hang", "sigkill")
NON_FATAL_KINDS = ("stage_error", "value_error")  # the request fails, the stage keeps serving
NUM_STAGES = 3
_ALLOC_HEADROOM = 512 << 20  # `alloc`: address space left above the stage's current size
_ALLOC_BYTES = 16 << 30  # `alloc`: what it then asks for


@dataclass(frozen=True)
class FaultSpec:
    kind: str
    stage: int = 0
    after: int = 0

    def __post_init__(self) -> None:
        if self.kind not in (*REQUEST_KINDS, *PROCESS_KINDS):
            raise ValueError(  # omni-errors: ignore[OE101]: a bad --fault flag: a usage error at startup
                f"unknown fault kind {self.kind!r}; expected one of {sorted({*REQUEST_KINDS, *PROCESS_KINDS})}"
            )
        if not 0 <= self.stage < NUM_STAGES:
            why = f"fault stage {self.stage} out of range 0..{NUM_STAGES - 1}"
            raise ValueError(why)  # omni-errors: ignore[OE101]: a bad --fault flag: a usage error
        if self.after < 0:
            why = f"fault step {self.after} must be >= 0"
            raise ValueError(why)  # omni-errors: ignore[OE101]: a bad --fault flag: a usage error at startup

    def as_payload(self) -> dict[str, Any]:
        return {"kind": self.kind, "stage": self.stage, "after": self.after}


def parse_header(value: str) -> FaultSpec:
    """`KIND[;stage=S][;after=N]` -> FaultSpec; ValueError says what is wrong."""
    kind, *options = (part.strip() for part in value.split(";"))
    fields: dict[str, int] = {}
    for option in options:
        key, sep, raw = option.partition("=")
        if not sep or key not in ("stage", "after") or not raw.strip().isdigit():
            why = f"bad fault option {option!r}; expected stage=S or after=N"
            raise ValueError(why)  # omni-errors: ignore[OE101]: its caller raises VLLMValidationError from it
        fields[key] = int(raw)
    return FaultSpec(kind, **fields)


def _mark(marker: str | None, stage_id: int, kind: str) -> None:
    """Record when the fault fired, so a harness can time failure-to-answer from that moment."""
    if marker:
        with open(marker, "a") as f:
            f.write(f"{time.time()!r} {stage_id} {kind}\n")


def first_fault_time(marker: str | Path) -> float | None:
    """The wall-clock time of the first fault recorded in `marker`, or None if none fired."""
    try:
        first = Path(marker).read_text().split("\n", 1)[0]
    except OSError:
        return None
    return float(first.split()[0]) if first else None


def _vm_size() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def _wrapped_oom(stage_id: int) -> BaseException:
    import torch

    try:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
    except torch.OutOfMemoryError as oom:
        try:
            why = f"stage {stage_id}: generation failed (injected wrapped OOM)"
            raise RuntimeError(why) from oom  # omni-errors: ignore[OE103]: the injected fault: a wrapped OOM (seed 003)
        except RuntimeError as wrapped:
            return wrapped


def fire(kind: str, stage_id: int, marker: str | None = None) -> BaseException | None:
    """Inside a stage: do the fault. Returns the exception for the caller to raise or to report as
    the request's failure (`NON_FATAL_KINDS`); `hang` and `sigkill` do not return, `alloc` raises."""
    if kind == "inductor":  # load the compiler first (seconds); an engine that compiles has it loaded
        import torch._inductor.exc
    _mark(marker, stage_id, kind)
    if kind == "stage_error":
        return RuntimeError(f"stage {stage_id} could not process this request (injected stage_error)")
    if kind == "value_error":
        return ValueError(f"stage {stage_id} rejected this request's input (injected value_error)")
    if kind == "fatal":
        return RuntimeError(f"illegal memory access in stage {stage_id} (injected fatal engine error)")
    if kind == "oom":
        import torch

        return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (injected)")
    if kind == "oom_wrapped":
        return _wrapped_oom(stage_id)
    if kind == "inductor":
        from torch._inductor.exc import InductorError

        return InductorError(AssertionError("'XBLOCK' too large. Maximum: 4096. Actual: 8192"), None)
    if kind == "alloc":  # on the CPU, torch raises a plain RuntimeError here, not OutOfMemoryError
        import resource

        import torch

        limit = _vm_size() + _ALLOC_HEADROOM
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        torch.empty(_ALLOC_BYTES // 4, dtype=torch.float32).fill_(1.0)
        return None  # pragma: no cover - the allocation raises
    if kind == "startup":
        return RuntimeError(
            f"stage {stage_id}: model weights not found at /models/missing/model.safetensors (injected)"
        )
    if kind == "hang":
        while True:  # a stuck kernel: no heartbeat, deaf to SIGTERM; only SIGKILL ends it
            time.sleep(0.05)
    if kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(10)  # pragma: no cover - the kernel delivers SIGKILL first
    why = f"fault kind {kind!r} cannot fire in a stage"
    raise ValueError(why)  # omni-errors: ignore[OE101]: a defect in the fault table


class StageFaults:
    """One stage's faults: the process-level one it was started with, and per-request ones.

    Build it first thing in the engine's constructor (a `startup` fault raises there). Call `step`
    once per engine step and `request` once per step of each running request; both raise a fatal
    fault's exception (it must escape `step()`) and return the failures of the non-fatal kinds.
    """

    def __init__(
        self, stage_id: int, *, fault: str | None = None, fault_after: int = 0, marker: str | None = None
    ) -> None:
        self.stage_id = stage_id
        self.fault = fault
        self.fault_after = fault_after
        self.marker = marker
        if fault == "startup":
            raise self._fire("startup")
        if fault == "inductor":
            # An engine that compiles loaded the compiler while it was built; importing it at the
            # fault instead holds the loop for seconds (over 30 s at load 20), which the hang
            # detector rightly reports as a hung stage.
            import torch._inductor.exc  # noqa: F401

    def _fire(self, kind: str) -> BaseException:
        exc = fire(kind, self.stage_id, self.marker)
        assert exc is not None, f"fault {kind} returns no exception"
        return exc

    def step(self, steps: int, requests: Iterable[str]) -> list[RequestFailure]:
        """The process-level fault at engine step `steps`: from then on a non-fatal kind fails every
        request given (the caller drops them); a fatal kind fires once and raises."""
        if self.fault is None or steps <= self.fault_after:
            return []
        if self.fault in NON_FATAL_KINDS:
            return [RequestFailure(rid, self._fire(self.fault)) for rid in requests]
        kind, self.fault = self.fault, None
        raise self._fire(kind)

    def request(self, request_id: str, fault: Mapping[str, Any] | None, steps: int) -> RequestFailure | None:
        """The request's own fault (`FaultSpec.as_payload()`), once it has run `steps` steps here."""
        if not fault or fault["stage"] != self.stage_id or steps <= fault["after"]:
            return None
        exc = self._fire(fault["kind"])
        if fault["kind"] not in NON_FATAL_KINDS:
            raise exc
        return RequestFailure(request_id, exc)
