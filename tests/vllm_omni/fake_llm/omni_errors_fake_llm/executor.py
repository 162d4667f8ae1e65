"""`FakeLLMExecutor`: vLLM's `UniProcExecutor` with a CPU worker that answers without a model.

vLLM's real `EngineCore` and scheduler (vLLM-Omni's `OmniARScheduler` or `OmniGenerationScheduler`)
run in vLLM-Omni's `StageEngineCoreProc`; only the worker is fake. It answers the startup calls
(the KV-cache spec of one tiny attention layer, the memory it may use, warm-up) and `execute_model`
with tokens it makes up, or with an audio tensor for a generation stage (code2wav), as vLLM's GPU
model runners return them. A deploy yaml names this class as `distributed_executor_backend`.

An autoregressive stage answers with the tokens of the fault markers its prompt holds for later
stages (so that they reach the stage they name through vLLM-Omni's own stage-input path), then
`ok`, then its end-of-sequence token. The faults of this stage fire in `execute_model`, where a
GPU stage's own failures happen (`faults.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from vllm.v1.executor.uniproc_executor import UniProcExecutor
from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheSpec
from vllm.v1.kv_cache_layout import KVCacheLayout
from vllm.v1.worker.worker_base import CompilationTimes
from vllm_omni.outputs import OmniModelRunnerOutput

from omni_errors_fake_llm.faults import before_step, forwarded, stage_faults, unreadable
from omni_errors_fake_llm.model import AUDIO_SAMPLES, EOS_TOKEN, HEAD_SIZE, NUM_KV_HEADS

__all__ = ["FakeLLMExecutor", "FakeWorker"]

#: What one stage's KV cache may use: enough blocks for a few short requests, nothing to allocate.
_KV_BYTES = 64 << 20
_BLOCK_SIZE = 16


@dataclass
class _Request:
    prompt_len: int
    answer: list[int]
    faults: list[str]
    computed: int = 0
    sent: int = 0
    fired: set[str] = field(default_factory=set)


class FakeWorker:
    """The worker calls `EngineCore` makes through `collective_rpc`, answered on the CPU."""

    def __init__(self, vllm_config: Any) -> None:
        self.vllm_config = vllm_config
        model_config = vllm_config.model_config
        self.stage_id = int(getattr(model_config, "stage_id", 0) or 0)
        self.generation = getattr(model_config, "worker_type", None) == "generation"
        self.tokenizer = Tokenizer.from_file(str(Path(model_config.tokenizer or model_config.model) / "tokenizer.json"))
        self.eos = self.tokenizer.token_to_id(EOS_TOKEN)
        self.requests: dict[str, _Request] = {}

    # -- startup -------------------------------------------------------------------------------

    def get_kv_cache_spec(self) -> dict[str, KVCacheSpec]:
        spec = FullAttentionSpec(
            block_size=_BLOCK_SIZE, num_kv_heads=NUM_KV_HEADS, head_size=HEAD_SIZE, dtype=torch.float32
        )
        return {"model.layers.0.self_attn.attn": spec}

    def get_supported_kv_cache_layouts(self) -> list[str]:
        return [KVCacheLayout.LBNHC.name]

    def set_kv_cache_layout(self, kv_cache_layout: str) -> None:
        pass

    def determine_available_memory(self) -> int:
        return _KV_BYTES

    def initialize_from_config(self, kv_cache_config: Any) -> None:
        pass

    def compile_or_warm_up_model(self) -> CompilationTimes:
        return CompilationTimes(language_model=0.0, encoder=0.0)

    def get_supported_tasks(self) -> tuple[str, ...]:
        return ("generate",)

    def supports_draft_weight_updates(self) -> bool:
        return False

    def get_kv_connector_handshake_metadata(self) -> None:
        return None

    # -- serving -------------------------------------------------------------------------------

    def execute_model(self, scheduler_output: Any) -> OmniModelRunnerOutput:
        for new in scheduler_output.scheduled_new_reqs:
            ids = list(new.prompt_token_ids or [])
            text = self.tokenizer.decode(ids, skip_special_tokens=False)
            answer = self.tokenizer.encode(forwarded(text, self.stage_id) + "ok").ids
            self.requests[new.req_id] = _Request(len(ids), answer, stage_faults(text, self.stage_id))
        for req_id in scheduler_output.finished_req_ids:
            self.requests.pop(req_id, None)
        req_ids = list(scheduler_output.num_scheduled_tokens)
        for req_id in req_ids:  # the faults fire in the forward, as a GPU stage's own failures do
            request = self.requests[req_id]
            before_step(request.faults, request.fired, self.stage_id)
        sampled: list[list[int]] = []
        multimodal: list[dict[str, object]] = []
        for req_id in req_ids:
            request = self.requests[req_id]
            request.computed += scheduler_output.num_scheduled_tokens[req_id]
            multimodal.append(unreadable() if "unreadable" in request.faults else {})
            if self.generation:
                sampled.append([])
                multimodal[-1] = multimodal[-1] or {"audio": torch.zeros(AUDIO_SAMPLES)}
                continue
            if request.computed < request.prompt_len:  # a prefill chunk samples nothing
                sampled.append([])
                continue
            token = request.answer[request.sent] if request.sent < len(request.answer) else self.eos
            request.sent += 1
            sampled.append([token])
        return OmniModelRunnerOutput(
            req_ids=req_ids,
            req_id_to_index={req_id: i for i, req_id in enumerate(req_ids)},
            sampled_token_ids=sampled,
            logprobs=None,
            prompt_logprobs_dict={},
            pooler_output=None,
            multimodal_outputs=multimodal if any(multimodal) else None,
        )

    def sample_tokens(self, grammar_output: Any) -> None:
        return None

    def take_draft_token_ids(self) -> None:
        return None

    def check_health(self) -> None:
        pass

    def shutdown(self) -> None:
        self.requests.clear()


class FakeLLMExecutor(UniProcExecutor):
    """vLLM's one-process executor over `FakeWorker` (named by the deploy yaml)."""

    def _init_executor(self) -> None:
        self.driver_worker = FakeWorker(self.vllm_config)  # type: ignore[assignment]
