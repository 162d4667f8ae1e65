"""The test pipelines, registered out of tree (`vllm_omni.config.pipeline_registry.register_pipeline`).

- `omni_errors_talk`: Qwen2.5-Omni's shape, thinker -> talker -> code2wav, text from the thinker
  and audio from code2wav (the seed's pipeline);
- `omni_errors_chat`: one autoregressive stage, for the cases where the topology does not matter
  (each of those ends its server, so it should start fast).
"""

from __future__ import annotations

from vllm_omni.config.stage_config import PipelineConfig, StageExecutionType, StagePipelineConfig

from omni_errors_fake_llm.model import STAGES

__all__ = ["PIPELINES", "register"]

_ARCH = "Qwen2ForCausalLM"
#: Both pipelines' first stage: autoregressive, the text the client reads, the tokenizer's owner.
_THINKER = StagePipelineConfig(
    stage_id=0,
    model_stage="thinker",
    execution_type=StageExecutionType.LLM_AR,
    final_output=True,
    final_output_type="text",
    owns_tokenizer=True,
)

PIPELINES = {
    "omni_errors_talk": PipelineConfig(
        model_type="omni_errors_talk",
        model_arch=_ARCH,
        stages=(
            _THINKER,
            StagePipelineConfig(
                stage_id=1, model_stage="talker", execution_type=StageExecutionType.LLM_AR, input_sources=(0,)
            ),
            StagePipelineConfig(
                stage_id=2,
                model_stage="code2wav",
                execution_type=StageExecutionType.LLM_GENERATION,
                input_sources=(1,),
                final_output=True,
                final_output_type="audio",
                engine_output_type="audio",
            ),
        ),
    ),
    "omni_errors_chat": PipelineConfig(
        model_type="omni_errors_chat",
        model_arch=_ARCH,
        stages=(_THINKER,),
    ),
}


_KINDS = {StageExecutionType.LLM_AR: "ar", StageExecutionType.LLM_GENERATION: "generation"}
# The deploy yaml is written from `model.STAGES`: the two must describe the same pipelines.
assert {name: tuple(_KINDS[s.execution_type] for s in p.stages) for name, p in PIPELINES.items()} == STAGES


def register() -> None:
    from vllm_omni.config.pipeline_registry import register_pipeline

    for pipeline in PIPELINES.values():
        register_pipeline(pipeline)
