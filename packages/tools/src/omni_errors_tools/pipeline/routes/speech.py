"""`POST /v1/audio/speech`: the whole utterance as WAV (or raw 16-bit PCM)."""

from __future__ import annotations

from fastapi import APIRouter, Header
from omni_errors.server.openapi import error_responses
from omni_errors_tools.pipeline.audio import audio_response_body
from omni_errors_tools.pipeline.routes import AUDIO_200, request_id
from omni_errors_tools.pipeline.schemas import Limits, SpeechRequest, speech_payload
from omni_errors_tools.pipeline.service import Service
from starlette.responses import Response

__all__ = ["routes"]


def routes(service: Service, limits: Limits) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/audio/speech", responses={**AUDIO_200, **error_responses(404, 409, 503, 504)})
    async def speech(
        req: SpeechRequest,
        x_request_id: str | None = Header(default=None),
        x_omni_fault: str | None = Header(default=None),
    ) -> Response:
        payload = speech_payload(req, limits, x_omni_fault)
        rid = service.submit(payload, request_id("speech", x_request_id))
        result = await service.collect(rid)
        body, media_type = audio_response_body(result.pcm, req.response_format)
        return Response(body, media_type=media_type, headers={"x-request-id": rid})

    return router
