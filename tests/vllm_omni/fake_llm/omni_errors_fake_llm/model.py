"""The model folder and deploy yaml of a CPU LLM-stage server, made at test time (no weights, no hub).

The folder holds a Qwen2 `config.json` with one tiny layer and a byte-level tokenizer built here
with `tokenizers` (every byte one token, and Qwen's chat tokens); the deploy yaml names the
pipeline (`pipelines.py`), the fake executor, each stage's worker class (vLLM-Omni has no CPU
platform: the GPU classes are only imported) and how many replicas each stage has.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["AUDIO_SAMPLES", "EOS_TOKEN", "HEAD_SIZE", "NUM_KV_HEADS", "STAGES", "deploy_yaml", "model_dir"]

EOS_TOKEN = "<|im_end|>"
_SPECIAL = ["<|endoftext|>", "<|im_start|>", EOS_TOKEN]
NUM_KV_HEADS = 2
HEAD_SIZE = 16
#: One code2wav answer: 0.1 s of silence at 24 kHz.
AUDIO_SAMPLES = 2400
_CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
#: Each test pipeline's stages in order: "ar" (autoregressive) or "generation" (code2wav, one step).
#: Plain data, so that a process that only writes a server's files imports nothing of vLLM;
#: `pipelines.PIPELINES` is registered from the same shapes.
STAGES = {"omni_errors_talk": ("ar", "ar", "generation"), "omni_errors_chat": ("ar",)}
_WORKERS = {
    "ar": "vllm_omni.worker.gpu_ar_worker.GPUARWorker",
    "generation": "vllm_omni.worker.gpu_generation_worker.GPUGenerationWorker",
}


def _config(vocab_size: int, eos_id: int) -> dict[str, object]:
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "hidden_size": NUM_KV_HEADS * HEAD_SIZE * 2,
        "intermediate_size": 128,
        "num_attention_heads": NUM_KV_HEADS * 2,
        "num_key_value_heads": NUM_KV_HEADS,
        "num_hidden_layers": 1,
        "vocab_size": vocab_size,
        "max_position_embeddings": 1024,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "tie_word_embeddings": True,
        "torch_dtype": "float32",
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
    }


def model_dir(parent: Path) -> Path:
    """Write the model folder under `parent` and return it."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    model = parent / "model"
    model.mkdir(parents=True, exist_ok=True)
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    tokenizer = Tokenizer(models.BPE(vocab={ch: i for i, ch in enumerate(alphabet)}, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens(_SPECIAL)
    tokenizer.save(str(model / "tokenizer.json"))
    eos_id = tokenizer.token_to_id(EOS_TOKEN)
    vocab_size = 64 * (tokenizer.get_vocab_size() // 64 + 1)
    (model / "config.json").write_text(json.dumps(_config(vocab_size, eos_id), indent=1))
    (model / "generation_config.json").write_text(json.dumps({"eos_token_id": eos_id, "bos_token_id": eos_id}))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS_TOKEN,
        "pad_token": "<|endoftext|>",
        "model_max_length": 1024,
        "chat_template": _CHAT_TEMPLATE,
    }
    (model / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=1))
    return model


def deploy_yaml(parent: Path, pipeline: str, *, replicas: dict[int, int] | None = None) -> Path:
    """Write the deploy yaml of `pipeline` (`STAGES`) under `parent` and return it; `replicas` gives
    a stage more than one replica."""
    lines = [
        f"pipeline: {pipeline}",
        "async_chunk: false",
        "distributed_executor_backend: omni_errors_fake_llm.executor.FakeLLMExecutor",
        "stages:",
    ]
    for stage_id, worker in enumerate(STAGES[pipeline]):
        lines += [
            f"  - stage_id: {stage_id}",
            f"    worker_cls: {_WORKERS[worker]}",
            "    max_num_seqs: 8",
            "    max_num_batched_tokens: 1024",
            "    max_model_len: 1024",
            "    enforce_eager: true",
            "    enable_prefix_caching: false",
            "    async_scheduling: false",
            f"    num_replicas: {(replicas or {}).get(stage_id, 1)}",
            "    default_sampling_params:",
            "      temperature: 0.0",
            "      max_tokens: 64",
        ]
    path = parent / f"deploy-{pipeline}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path
