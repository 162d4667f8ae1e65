"""Request schemas (OpenAI-shaped) and their semantic validation into stage-0 payloads.

Schema errors (wrong types, missing fields) are FastAPI's `RequestValidationError` (400 with the
parameter); semantic ones raise vLLM's classes: `VLLMValidationError` naming the parameter (an
unknown voice included: a value of `voice`, as OpenAI's API and vLLM-Omni's TTS adapters answer it),
`VLLMNotFoundError` for an unknown model, `VLLMUnprocessableEntityError` for media that cannot be
decoded. Rejected values are never echoed.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Literal

from omni_errors_tools.pipeline.audio import decode_wav_b64
from omni_errors_tools.pipeline.defaults import DEFAULT_MAX_BODY_BYTES, DEFAULT_MODEL
from omni_errors_tools.pipeline.faults import REQUEST_KINDS, FaultSpec, parse_header
from pydantic import BaseModel, ConfigDict, Field
from vllm.exceptions import VLLMNotFoundError, VLLMValidationError

__all__ = ["ChatRequest", "JobRequest", "Limits", "SpeechRequest", "chat_payload", "speech_payload"]

VOICES = ("omni", "chelsie", "ethan")


@dataclass(frozen=True)
class Limits:
    model: str = DEFAULT_MODEL
    max_model_len: int = 2048
    max_tokens: int = 256  # the largest max_tokens a request may ask for
    default_max_tokens: int = 32
    allow_request_faults: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES  # a larger request body is answered 413 before it is read


class ChatMessage(BaseModel):
    role: Literal["system", "user", "assistant", "developer"]
    content: str | list[dict[str, Any]]


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    messages: list[ChatMessage]
    stream: bool = False
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    temperature: float = 1.0
    seed: int = 0
    n: int = 1
    modalities: list[str] = Field(default_factory=lambda: ["text"])
    omni_fault: dict[str, Any] | None = None


class SpeechRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    model: str
    input: str
    voice: str = "omni"
    response_format: str = "wav"
    speed: float = 1.0
    seed: int = 0
    omni_fault: dict[str, Any] | None = None


class JobRequest(SpeechRequest):
    id: str | None = None


def _check_model(model: str, limits: Limits) -> None:
    if model != limits.model:
        raise VLLMNotFoundError(f"The model does not exist; this server serves `{limits.model}`.")


def _fault(body: dict[str, Any] | None, header: str | None, limits: Limits) -> dict[str, Any] | None:
    if body is None and header is None:
        return None
    if not limits.allow_request_faults:
        raise VLLMValidationError(
            "fault injection is disabled on this server (start it with --allow-request-faults)", parameter="omni_fault"
        )
    try:
        spec = parse_header(header) if header is not None else FaultSpec(**(body or {}))
    except (TypeError, ValueError) as exc:
        raise VLLMValidationError(f"invalid fault: {exc}", parameter="omni_fault") from None
    if spec.kind not in REQUEST_KINDS:
        raise VLLMValidationError(f"fault kind {spec.kind} cannot be asked for per request", parameter="omni_fault")
    if spec.kind == "validation":
        raise VLLMValidationError("request rejected by an injected validation fault", parameter="omni_fault")
    return spec.as_payload()


def _prompt(req: ChatRequest) -> list[int]:
    ids: list[int] = []
    for i, message in enumerate(req.messages):
        parts = [{"type": "text", "text": message.content}] if isinstance(message.content, str) else message.content
        for j, part in enumerate(parts):
            where = f"messages[{i}].content[{j}]"
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str):
                ids.extend(part["text"].encode("utf-8"))
            elif kind == "input_audio" and isinstance(part.get("input_audio"), dict):
                pcm = decode_wav_b64(str(part["input_audio"].get("data", "")), parameter=f"{where}.input_audio.data")
                ids.extend(zlib.crc32(pcm[k : k + 640]) % 255 + 1 for k in range(0, min(len(pcm), 64000), 640))
            else:
                raise VLLMValidationError(f"unsupported content part type in {where}", parameter=f"{where}.type")
    return [t or 1 for t in ids]


def chat_payload(req: ChatRequest, limits: Limits, fault_header: str | None = None) -> dict[str, Any]:
    _check_model(req.model, limits)
    if not req.messages:
        raise VLLMValidationError("messages must contain at least one message", parameter="messages")
    if req.n != 1:
        raise VLLMValidationError("only n=1 is supported", parameter="n")
    max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    name = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
    max_tokens = limits.default_max_tokens if max_tokens is None else max_tokens
    if not 1 <= max_tokens <= limits.max_tokens:
        raise VLLMValidationError(f"{name} must be between 1 and {limits.max_tokens}", parameter=name)
    if not 0.0 <= req.temperature <= 2.0:
        raise VLLMValidationError("temperature must be between 0 and 2", parameter="temperature")
    if not req.modalities or any(m not in ("text", "audio") for m in req.modalities):
        raise VLLMValidationError("modalities must be a non-empty subset of ['text', 'audio']", parameter="modalities")
    prompt = _prompt(req)
    if not prompt:
        raise VLLMValidationError("the prompt is empty", parameter="messages")
    if len(prompt) + max_tokens > limits.max_model_len:
        raise VLLMValidationError(
            f"prompt ({len(prompt)} tokens) plus {name} exceeds the model's context of {limits.max_model_len}",
            parameter="messages",
        )
    return {
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": req.temperature,
        "seed": req.seed,
        "audio": "audio" in req.modalities,
        "fault": _fault(req.omni_fault, fault_header, limits),
    }


def speech_payload(req: SpeechRequest, limits: Limits, fault_header: str | None = None) -> dict[str, Any]:
    _check_model(req.model, limits)
    if req.voice not in VOICES:
        raise VLLMValidationError(f"voice must be one of {', '.join(VOICES)}", parameter="voice")
    if not req.input.strip():
        raise VLLMValidationError("input must not be empty", parameter="input")
    if len(req.input) > 4096:
        raise VLLMValidationError("input must be at most 4096 characters", parameter="input")
    if req.response_format not in ("wav", "pcm"):
        raise VLLMValidationError("response_format must be 'wav' or 'pcm'", parameter="response_format")
    if not 0.25 <= req.speed <= 4.0:
        raise VLLMValidationError("speed must be between 0.25 and 4.0", parameter="speed")
    prompt = [b or 1 for b in (req.voice + ": " + req.input).encode("utf-8")][-limits.max_model_len // 2 :]
    tokens = max(4, min(limits.max_tokens, int(len(req.input) / req.speed)))
    return {
        "prompt": prompt,
        "max_tokens": tokens,
        "temperature": 0.7,
        "seed": req.seed,
        "audio": True,
        "fault": _fault(req.omni_fault, fault_header, limits),
    }
