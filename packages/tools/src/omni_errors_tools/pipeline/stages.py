"""The three stage engines (thinker, talker, code2wav) on the lifecycle's `StageEngine` protocol.

Each engine batches its running requests like vLLM's scheduler (at most `max_num_seqs` running, the
rest waiting), runs one step of its model for the whole batch, and paces itself to
`step_interval` seconds per step so that a stream is visible on a terminal. Payloads between
stages are plain dicts; the request's fault (if any) travels with them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from omni_errors_tools.lifecycle.engine import RequestFailure, StageOutput
from omni_errors_tools.pipeline.faults import StageFaults
from omni_errors_tools.pipeline.models import HOP, VOCAB, Code2Wav, Talker, Thinker

__all__ = ["Code2WavStage", "TalkerStage", "ThinkerStage"]

EOS = 0  # byte NUL: never in a text prompt


@dataclass
class _Req:
    payload: dict[str, Any]
    steps: int = 0
    state: dict[str, Any] = field(default_factory=dict)


class _BatchStage:
    stage_id = -1

    def __init__(
        self,
        *,
        seed: int = 0,
        max_num_seqs: int = 128,
        step_interval: float = 0.0,
        fault: str | None = None,
        fault_after: int = 0,
        fault_marker: str | None = None,
    ) -> None:
        self.faults = StageFaults(self.stage_id, fault=fault, fault_after=fault_after, marker=fault_marker)
        torch.set_num_threads(1)
        torch.manual_seed(seed + self.stage_id)
        self.max_num_seqs = max_num_seqs
        self.step_interval = step_interval
        self.waiting: dict[str, dict[str, Any]] = {}
        self.running: dict[str, _Req] = {}
        self.steps = 0
        self._last_step = 0.0

    # -- protocol --------------------------------------------------------------------------

    def add_request(self, request_id: str, payload: Any) -> None:
        if not isinstance(payload, dict):
            why = f"stage {self.stage_id} expects a dict payload, got {type(payload).__name__}"
            raise TypeError(why)  # omni-errors: ignore[OE102]: a pipeline defect, reported as a stage failure
        self.waiting[request_id] = payload

    def abort_request(self, request_id: str) -> None:
        self.waiting.pop(request_id, None)
        self.running.pop(request_id, None)

    def has_unfinished_requests(self) -> bool:
        return bool(self.waiting or self.running)

    def shutdown(self) -> None:
        self.waiting.clear()
        self.running.clear()

    @torch.inference_mode()
    def step(self) -> Sequence[StageOutput | RequestFailure]:
        self._pace()
        self.steps += 1
        out: list[StageOutput | RequestFailure] = []
        self._process_fault(out)
        while self.waiting and len(self.running) < self.max_num_seqs:
            rid = next(iter(self.waiting))
            payload = self.waiting.pop(rid)
            try:
                self.running[rid] = _Req(payload, state=self.start(payload))
            except Exception as exc:  # omni-errors: ignore[OE202]: the request's failure, reported by the worker loop
                out.append(RequestFailure(rid, exc))
        self._request_faults(out)
        if self.running:
            out.extend(self.compute())
        return out

    # -- subclasses ------------------------------------------------------------------------

    def start(self, payload: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError  # omni-errors: ignore[OE105]: abstract method

    def compute(self) -> list[StageOutput]:
        raise NotImplementedError  # omni-errors: ignore[OE105]: abstract method

    # -- helpers ---------------------------------------------------------------------------

    def _pace(self) -> None:
        if self.step_interval > 0:
            wait = self._last_step + self.step_interval - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        self._last_step = time.monotonic()

    def _process_fault(self, out: list[StageOutput | RequestFailure]) -> None:
        failed = self.faults.step(self.steps, [*self.waiting, *self.running])
        if failed:  # a non-fatal process fault: every request reaching this stage from now on fails
            out.extend(failed)
            self.waiting.clear()
            self.running.clear()

    def _request_faults(self, out: list[StageOutput | RequestFailure]) -> None:
        for rid, req in list(self.running.items()):
            req.steps += 1
            failed = self.faults.request(rid, req.payload.get("fault"), req.steps)  # a fatal one raises
            if failed is not None:
                del self.running[rid]
                out.append(failed)

    def _forward(self, req: _Req, **payload: Any) -> dict[str, Any]:
        """The next stage's payload: this stage's result plus what travels with the request."""
        keep: dict[str, Any] = {k: req.payload[k] for k in ("fault", "audio", "seed") if k in req.payload}
        return {**keep, **payload}


class ThinkerStage(_BatchStage):
    """Payload: {"prompt": [byte ids], "max_tokens", "temperature", "seed", "audio", "fault"}.
    Emits each token id; the finished payload carries all tokens and the finish reason."""

    stage_id = 0

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = Thinker().eval()

    def start(self, payload: dict[str, Any]) -> dict[str, Any]:
        prompt = [int(t) for t in payload["prompt"]]
        if not prompt or any(not 0 <= t < VOCAB for t in prompt):
            why = f"prompt tokens must be in 0..{VOCAB - 1}"
            raise ValueError(why)  # omni-errors: ignore[OE101]: reported as the request's error by the worker
        h, last = self.model.prefill(prompt[-512:])
        return {"h": h, "last": last, "out": [], "left": int(payload.get("max_tokens", 16))}

    def compute(self) -> list[StageOutput]:
        rids = list(self.running)
        states = [self.running[r].state for r in rids]
        payloads = [self.running[r].payload for r in rids]
        tokens, h = self.model.decode(
            torch.tensor([s["last"] for s in states]),
            torch.stack([s["h"] for s in states]),
            torch.tensor([float(p.get("seed", 0)) for p in payloads], dtype=torch.float64),
            torch.tensor([float(len(s["out"])) for s in states], dtype=torch.float64),
            torch.tensor([float(p.get("temperature", 1.0)) for p in payloads]),
        )
        out: list[StageOutput] = []
        for i, (rid, tok) in enumerate(zip(rids, tokens.tolist(), strict=True)):
            s = self.running[rid].state
            s["h"], s["last"] = h[i], tok
            s["left"] -= 1
            if tok == EOS or s["left"] <= 0:
                req = self.running.pop(rid)
                reason = "stop" if tok == EOS else "length"
                if tok != EOS:
                    s["out"].append(tok)
                    out.append(StageOutput(rid, tok, False))
                out.append(StageOutput(rid, self._forward(req, tokens=s["out"], finish_reason=reason), True))
            else:
                s["out"].append(tok)
                out.append(StageOutput(rid, tok, False))
        return out


class TalkerStage(_BatchStage):
    """One thinker token per request per step -> codec codes. Internal (not emitted to clients)."""

    stage_id = 1

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.model = Talker().eval()

    def start(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"tokens": list(payload.get("tokens", [])) if payload.get("audio") else [], "i": 0, "codes": []}

    def compute(self) -> list[StageOutput]:
        out: list[StageOutput] = []
        live = [r for r, req in self.running.items() if req.state["i"] < len(req.state["tokens"])]
        if live:
            states = [self.running[r].state for r in live]
            h = torch.stack([s.get("h", torch.zeros(64)) for s in states])
            codes, h2 = self.model.step(torch.tensor([s["tokens"][s["i"]] for s in states]), h)
            for i, s in enumerate(states):
                s["h"] = h2[i]
                s["codes"].append(codes[i].tolist())
                s["i"] += 1
        for rid in list(self.running):
            s = self.running[rid].state
            if s["i"] >= len(s["tokens"]):
                req = self.running.pop(rid)
                out.append(StageOutput(rid, self._forward(req, codes=s["codes"]), True))
        return out


class Code2WavStage(_BatchStage):
    """Decodes `frames_per_step` codec frames per request per step into 16-bit PCM chunks (emitted)."""

    stage_id = 2

    def __init__(self, *, frames_per_step: int = 8, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.frames_per_step = frames_per_step
        self.model = Code2Wav().eval()

    def start(self, payload: dict[str, Any]) -> dict[str, Any]:
        return {"codes": list(payload.get("codes", [])), "i": 0}

    def compute(self) -> list[StageOutput]:
        out: list[StageOutput] = []
        rids = list(self.running)
        chunks = []
        for rid in rids:
            s = self.running[rid].state
            chunks.append(s["codes"][s["i"] : s["i"] + self.frames_per_step])
            s["i"] += len(chunks[-1])
        width = max((len(c) for c in chunks), default=0)
        pcm = None
        if width:
            batch = torch.tensor([c + [[0] * 4] * (width - len(c)) for c in chunks], dtype=torch.long)
            pcm = (self.model(batch) * 32767).to(torch.int16)
        for i, rid in enumerate(rids):
            s = self.running[rid].state
            data = pcm[i, : len(chunks[i]) * HOP].numpy().tobytes() if pcm is not None and chunks[i] else b""
            finished = s["i"] >= len(s["codes"])
            if finished:
                self.running.pop(rid)
            if data or finished:
                out.append(StageOutput(rid, {"pcm": data}, finished))
        return out
