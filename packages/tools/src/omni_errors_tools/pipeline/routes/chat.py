"""`POST /v1/chat/completions`: one JSON completion, or (`"stream": true`) server-sent chunks."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Header
from omni_errors.render.sse import SSE_DONE, sse_guard
from omni_errors.server.openapi import error_responses
from omni_errors_tools.pipeline.audio import wav_bytes
from omni_errors_tools.pipeline.models import detokenize
from omni_errors_tools.pipeline.routes import request_id
from omni_errors_tools.pipeline.schemas import ChatRequest, Limits, chat_payload
from omni_errors_tools.pipeline.service import Collected, Event, Service
from starlette.responses import JSONResponse, Response, StreamingResponse

__all__ = ["routes"]


_CHAT_200: dict[int | str, dict[str, Any]] = {
    200: {"description": "The completion, or (stream) its chunks", "content": {"text/event-stream": {}}}
}


def routes(service: Service, limits: Limits) -> APIRouter:
    router = APIRouter()

    @router.post("/v1/chat/completions", responses={**_CHAT_200, **error_responses(400, 404, 409, 422, 503, 504)})
    async def chat(
        req: ChatRequest,
        x_request_id: str | None = Header(default=None),
        x_omni_fault: str | None = Header(default=None),
    ) -> Response:
        payload = chat_payload(req, limits, x_omni_fault)
        rid = service.submit(payload, request_id("chatcmpl", x_request_id))
        created = int(time.time())
        headers = {"x-request-id": rid}
        if req.stream:
            chunks = _chunks(service.events(rid), rid, req.model, created)
            return StreamingResponse(sse_guard(chunks, request_id=rid), media_type="text/event-stream", headers=headers)
        result = await service.collect(rid)
        return JSONResponse(_completion(result, rid, req.model, created, payload), headers=headers)

    return router


def _chunk(rid: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


async def _chunks(events: AsyncIterator[Event], rid: str, model: str, created: int) -> AsyncIterator[str]:
    """The stream's chunks; a failure escapes to `sse_guard`, which ends the stream with it."""
    yield _chunk(rid, model, created, {"role": "assistant", "content": ""})
    async for ev in events:
        if ev.kind == "token":
            yield _chunk(rid, model, created, {"content": detokenize(ev.token)})
        elif ev.kind == "audio":
            yield _chunk(rid, model, created, {"audio": {"data": base64.b64encode(ev.pcm).decode()}})
        else:
            yield _chunk(rid, model, created, {}, ev.finish_reason)
    yield SSE_DONE


def _completion(result: Collected, rid: str, model: str, created: int, payload: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": "".join(map(detokenize, result.tokens))}
    if payload["audio"]:
        message["audio"] = {
            "id": f"audio-{rid}",
            "format": "wav",
            "data": base64.b64encode(wav_bytes(result.pcm)).decode(),
        }
    prompt_tokens = len(payload["prompt"])
    return {
        "id": rid,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": result.finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(result.tokens),
            "total_tokens": prompt_tokens + len(result.tokens),
        },
    }
