"""Small deterministic torch engines for tests and the CPU reference pipeline, with fault injection.

`ARStage` emits one token per step per request (a thinker/talker-like autoregressive stage);
`DiffusionStage` runs a fixed number of denoising steps on a latent and emits once at the end (a
code2wav/DiT-like stage). Both run real torch code on the CPU with one thread. Faults are chosen
with `fault=` and fire on step `fail_after_steps` (the time of firing is written to
`fault_marker`, so tests can measure failure-to-answer latency from the moment of failure).
`flood=N` makes each of the `flood_steps` steps after `fail_after_steps` also report N failures
of requests that do not exist (a stage gone wrong, flooding its link with error frames).
"""

from __future__ import annotations

import importlib
import os
import resource
import time
from collections.abc import Sequence
from typing import Any

import torch

from omni_errors.lifecycle.engine import RequestFailure, StageOutput

__all__ = ["FAULTS", "ARStage", "DiffusionStage"]

FAULTS = ("runtime", "oom", "oom_wrapped", "inductor", "engine_dead", "hang", "alloc")


def _make_fault(fault: str, alloc_bytes: int) -> BaseException | None:
    if fault == "runtime":
        return RuntimeError("stage kernel failed")
    if fault == "oom":
        return torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
    if fault == "oom_wrapped":  # seed 003: a library wrapped the OOM
        try:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        except torch.OutOfMemoryError as oom:
            try:
                raise RuntimeError("Diffusion generation failed") from oom
            except RuntimeError as wrapped:
                return wrapped
    if fault == "inductor":
        from torch._inductor.exc import InductorError

        return InductorError(AssertionError("'XBLOCK' too large. Maximum: 4096. Actual: 8192"), None)
    if fault == "engine_dead":
        from vllm.v1.engine.exceptions import EngineDeadError

        return EngineDeadError()
    if fault == "hang":
        while True:  # a stuck kernel: ignores everything but SIGKILL
            time.sleep(0.05)
    if fault == "alloc":  # a real allocation failure; run under rlimit_as_mb
        torch.empty(alloc_bytes // 4, dtype=torch.float32).fill_(1.0)
        return None
    raise ValueError(f"unknown fault {fault!r}; expected one of {FAULTS}")


class _ToyEngine:
    def __init__(
        self,
        *,
        seed: int = 0,
        step_delay: float = 0.0,
        fault: str | None = None,
        fail_after_steps: int = 0,
        fault_marker: str | None = None,
        fail_on_start: bool = False,
        rlimit_as_mb: int | None = None,
        alloc_bytes: int = 8 << 30,
        flood: int = 0,
        flood_steps: int = 0,
    ) -> None:
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        if fail_on_start:
            raise RuntimeError("model weights not found at /models/missing/checkpoint.safetensors")
        if rlimit_as_mb is not None:
            limit = _vm_size() + (rlimit_as_mb << 20)
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if fault == "inductor":  # an engine that compiles has inductor loaded long before it fails
            importlib.import_module("torch._inductor.exc")
        self.step_delay = step_delay
        self.fault = fault
        self.fail_after_steps = fail_after_steps
        self.fault_marker = fault_marker
        self.alloc_bytes = alloc_bytes
        self.flood, self.flood_steps = flood, flood_steps
        self.steps = 0
        self.shut_down = False
        self.requests: dict[str, dict[str, Any]] = {}  # per-request state, shaped by the subclass

    def abort_request(self, request_id: str) -> None:
        self.requests.pop(request_id, None)

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    def _maybe_fail(self) -> None:
        self.steps += 1
        if self.fault is None or self.steps < self.fail_after_steps:
            return
        if self.fault in ("hang", "alloc"):
            self._mark()
        exc = _make_fault(self.fault, self.alloc_bytes)
        if exc is not None:
            self._mark()
            raise exc

    def _flood(self) -> list[StageOutput | RequestFailure]:
        if not self.flood or not 0 <= self.steps - self.fail_after_steps < self.flood_steps:
            return []
        error = RuntimeError("flooded")
        return [RequestFailure(f"flood-{self.steps}-{i}", error) for i in range(self.flood)]

    def _mark(self) -> None:
        if self.fault_marker:
            with open(self.fault_marker, "w") as f:
                f.write(repr(time.time()))

    def shutdown(self) -> None:
        self.shut_down = True


def _vm_size() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


class ARStage(_ToyEngine):
    """Greedy decoding with a tiny embedding + MLP. Payload: {"prompt": [ints], "max_tokens": n}
    or a list of ints (a previous stage's tokens). Emits each token; the finished payload is the
    full token list. A payload with "fail": "value" or "oom" fails that request."""

    def __init__(self, *, vocab: int = 64, hidden: int = 32, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vocab = vocab
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, vocab))

    def add_request(self, request_id: str, payload: Any) -> None:
        if isinstance(payload, dict):
            prompt, max_tokens, fail = (
                list(payload.get("prompt", [1])),
                payload.get("max_tokens", 8),
                payload.get("fail"),
            )
        else:
            prompt, max_tokens, fail = [int(t) % self.vocab for t in payload] or [1], 4, None
        if not prompt or any(not 0 <= t < self.vocab for t in prompt):
            raise ValueError(f"prompt tokens must be in 0..{self.vocab - 1}")
        self.requests[request_id] = {"tokens": prompt, "out": [], "left": int(max_tokens), "fail": fail}

    @torch.inference_mode()
    def step(self) -> Sequence[StageOutput | RequestFailure]:
        self._maybe_fail()
        if self.step_delay:
            time.sleep(self.step_delay)
        ids = list(self.requests)
        out: list[StageOutput | RequestFailure] = self._flood()
        live = []
        for rid in ids:
            fail = self.requests[rid]["fail"]
            if fail:
                del self.requests[rid]
                err: BaseException = (
                    torch.OutOfMemoryError("CUDA out of memory") if fail == "oom" else ValueError("unsupported prompt")
                )
                out.append(RequestFailure(rid, err))
            else:
                live.append(rid)
        if not live:
            return out
        last = torch.tensor([self.requests[r]["tokens"][-1] for r in live])
        nxt = self.mlp(self.embed(last)).argmax(-1).tolist()
        for rid, tok in zip(live, nxt, strict=True):
            req = self.requests[rid]
            req["tokens"].append(tok)
            req["out"].append(tok)
            req["left"] -= 1
            if req["left"] <= 0:
                del self.requests[rid]
                out.append(StageOutput(rid, req["out"], True))
            else:
                out.append(StageOutput(rid, tok, False))
        return out


class DiffusionStage(_ToyEngine):
    """Runs `num_steps` denoising steps of a small conv on a latent seeded from the payload; emits
    once, at the end, with a short list of floats (the "waveform")."""

    def __init__(self, *, num_steps: int = 4, size: int = 8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.num_steps = num_steps
        self.size = size
        self.net = torch.nn.Conv2d(4, 4, 3, padding=1)

    def add_request(self, request_id: str, payload: Any) -> None:
        seed = sum(payload) if isinstance(payload, list) else int(payload.get("seed", 0)) if payload else 0
        gen = torch.Generator().manual_seed(seed)
        self.requests[request_id] = {"x": torch.randn(1, 4, self.size, self.size, generator=gen), "t": 0}

    @torch.inference_mode()
    def step(self) -> Sequence[StageOutput | RequestFailure]:
        self._maybe_fail()
        if self.step_delay:
            time.sleep(self.step_delay)
        out: list[StageOutput | RequestFailure] = []
        for rid in list(self.requests):
            req = self.requests[rid]
            req["x"] = req["x"] - 0.1 * self.net(req["x"])
            req["t"] += 1
            if req["t"] >= self.num_steps:
                del self.requests[rid]
                out.append(StageOutput(rid, [round(v, 4) for v in req["x"].flatten()[:8].tolist()], True))
        return out
