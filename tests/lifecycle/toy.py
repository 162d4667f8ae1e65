"""Small deterministic torch engines for the lifecycle tests, with the project's fault injection.

`ARStage` emits one token per step per request (a thinker/talker-like autoregressive stage);
`DiffusionStage` runs a fixed number of denoising steps on a latent and emits once at the end (a
code2wav/DiT-like stage). Both run real torch code on the CPU with one thread. Faults are those of
`omni_errors_tools.pipeline.faults` with its parameter names: `fault=KIND` fires after `fault_after`
engine steps (and writes its time to `fault_marker`); a payload's `"fault": {"kind", "stage",
"after"}` fires in that request. `flood=N` makes each of `flood_steps` steps after `flood_after`
also report N failures of requests that do not exist (a stage gone wrong, flooding its link).
Spawned stages import this module by name (`toy:ARStage`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
from omni_errors_tools.lifecycle.engine import RequestFailure, StageOutput
from omni_errors_tools.pipeline.faults import StageFaults

__all__ = ["ARStage", "DiffusionStage"]


class _ToyEngine:
    def __init__(
        self,
        *,
        stage_id: int = 0,
        seed: int = 0,
        step_delay: float = 0.0,
        fault: str | None = None,
        fault_after: int = 0,
        fault_marker: str | None = None,
        flood: int = 0,
        flood_steps: int = 0,
        flood_after: int = 0,
    ) -> None:
        self.faults = StageFaults(stage_id, fault=fault, fault_after=fault_after, marker=fault_marker)
        self.flood, self.flood_steps, self.flood_after = flood, flood_steps, flood_after
        torch.set_num_threads(1)
        torch.manual_seed(seed)
        self.step_delay = step_delay
        self.steps = 0
        self.shut_down = False
        self.requests: dict[str, dict[str, Any]] = {}  # per-request state, shaped by the subclass

    def abort_request(self, request_id: str) -> None:
        self.requests.pop(request_id, None)

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    def _begin_step(self) -> list[StageOutput | RequestFailure]:
        """Count the step, fire the faults due, pace; returns the requests that failed."""
        self.steps += 1
        out: list[StageOutput | RequestFailure] = list(self.faults.step(self.steps, list(self.requests)))
        for rid in list(self.requests):
            req = self.requests[rid]
            req["steps"] = req.get("steps", 0) + 1
            failed = self.faults.request(rid, req.get("fault"), req["steps"])
            if failed is not None:
                out.append(failed)
        for failed in out:
            self.requests.pop(failed.request_id, None)
        if self.flood and 0 <= self.steps - self.flood_after < self.flood_steps:
            error = RuntimeError("flooded")
            out += [RequestFailure(f"flood-{self.steps}-{i}", error) for i in range(self.flood)]
        if self.step_delay:
            time.sleep(self.step_delay)
        return out

    def shutdown(self) -> None:
        self.shut_down = True


class ARStage(_ToyEngine):
    """Greedy decoding with a tiny embedding + MLP. Payload: {"prompt": [ints], "max_tokens": n,
    "fault": ...} or a list of ints (a previous stage's tokens). Emits each token; the finished
    payload is the full token list."""

    def __init__(self, *, vocab: int = 64, hidden: int = 32, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.vocab = vocab
        self.embed = torch.nn.Embedding(vocab, hidden)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(hidden, hidden), torch.nn.GELU(), torch.nn.Linear(hidden, vocab))

    def add_request(self, request_id: str, payload: Any) -> None:
        if isinstance(payload, dict):
            prompt, max_tokens, fault = (
                list(payload.get("prompt", [1])),
                payload.get("max_tokens", 8),
                payload.get("fault"),
            )
        else:
            prompt, max_tokens, fault = [int(t) % self.vocab for t in payload] or [1], 4, None
        if not prompt or any(not 0 <= t < self.vocab for t in prompt):
            raise ValueError(f"prompt tokens must be in 0..{self.vocab - 1}")
        self.requests[request_id] = {"tokens": prompt, "out": [], "left": int(max_tokens), "fault": fault}

    @torch.inference_mode()
    def step(self) -> Sequence[StageOutput | RequestFailure]:
        out = self._begin_step()
        live = list(self.requests)
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
        fault = payload.get("fault") if isinstance(payload, dict) else None
        self.requests[request_id] = {
            "x": torch.randn(1, 4, self.size, self.size, generator=gen),
            "t": 0,
            "fault": fault,
        }

    @torch.inference_mode()
    def step(self) -> Sequence[StageOutput | RequestFailure]:
        out = self._begin_step()
        for rid in list(self.requests):
            req = self.requests[rid]
            req["x"] = req["x"] - 0.1 * self.net(req["x"])
            req["t"] += 1
            if req["t"] >= self.num_steps:
                del self.requests[rid]
                out.append(StageOutput(rid, [round(v, 4) for v in req["x"].flatten()[:8].tolist()], True))
        return out
