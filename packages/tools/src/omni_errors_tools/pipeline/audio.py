"""WAV in and out (16-bit mono PCM), with undecodable input reported as 422 naming the parameter."""

from __future__ import annotations

import base64
import binascii
import io
import wave

from omni_errors_tools.pipeline.models import SAMPLE_RATE

__all__ = ["audio_response_body", "decode_wav_b64", "wav_bytes"]

MAX_AUDIO_BYTES = 8 << 20


def wav_bytes(pcm: bytes, sample_rate: int = SAMPLE_RATE) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(sample_rate)
        w.writeframes(pcm)
    return buf.getvalue()


def audio_response_body(pcm: bytes, response_format: str) -> tuple[bytes, str]:
    """The body and media type for `response_format`: `pcm` as is, anything else as WAV."""
    if response_format == "pcm":
        return pcm, "audio/pcm"
    return wav_bytes(pcm), "audio/wav"


def decode_wav_b64(data: str, *, parameter: str) -> bytes:
    """The PCM frames of a base64 WAV; VLLMUnprocessableEntityError (422) if it is not one."""
    from vllm.exceptions import VLLMUnprocessableEntityError

    if len(data) > MAX_AUDIO_BYTES * 4 // 3 + 4:
        raise VLLMUnprocessableEntityError(f"audio is larger than {MAX_AUDIO_BYTES} bytes", parameter=parameter)
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise VLLMUnprocessableEntityError("audio data is not valid base64", parameter=parameter) from None
    try:
        with wave.open(io.BytesIO(raw), "rb") as w:
            if w.getsampwidth() != 2:
                raise VLLMUnprocessableEntityError("audio must be 16-bit PCM WAV", parameter=parameter)
            return w.readframes(w.getnframes())
    except (wave.Error, EOFError):
        raise VLLMUnprocessableEntityError("audio data could not be decoded as WAV", parameter=parameter) from None
