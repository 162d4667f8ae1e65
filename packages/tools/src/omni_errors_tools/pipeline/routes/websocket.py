"""`WS /v1/chat/ws`: one JSON chat request per message; `text.delta`/`audio.delta` events back, and
`{"type": "done"}` ends each request. An error ends the socket (`websocket_errors`)."""

from __future__ import annotations

import base64

from fastapi import APIRouter, WebSocket
from fastapi.exceptions import RequestValidationError
from omni_errors.render.websocket import websocket_errors
from omni_errors_tools.pipeline.models import SAMPLE_RATE, detokenize
from omni_errors_tools.pipeline.routes import FAULT_HEADER, request_id
from omni_errors_tools.pipeline.schemas import ChatRequest, Limits, chat_payload
from omni_errors_tools.pipeline.service import Service
from pydantic import ValidationError
from vllm.exceptions import VLLMValidationError

__all__ = ["routes"]


def _parse(text: str) -> ChatRequest:
    """The message as a chat request; schema errors are the same 400s as over HTTP."""
    try:
        return ChatRequest.model_validate_json(text)
    except ValidationError as exc:
        if any(e.get("type") == "json_invalid" for e in exc.errors()):
            raise VLLMValidationError("the message is not valid JSON", parameter="body") from None
        raise RequestValidationError(exc.errors(include_input=False)) from None


def routes(service: Service, limits: Limits) -> APIRouter:
    router = APIRouter()

    @router.websocket("/v1/chat/ws")
    async def chat_ws(ws: WebSocket) -> None:
        await ws.accept()
        fault_header = ws.headers.get(FAULT_HEADER)
        while True:
            async with websocket_errors(ws):
                payload = chat_payload(_parse(await ws.receive_text()), limits, fault_header)
                rid = service.submit(payload, request_id("chatws", None))
                async for ev in service.events(rid):
                    if ev.kind == "token":
                        await ws.send_json({"type": "text.delta", "id": rid, "delta": detokenize(ev.token)})
                    elif ev.kind == "audio":
                        await ws.send_json(
                            {"type": "audio.delta", "id": rid, "data": base64.b64encode(ev.pcm).decode()}
                        )
                    else:
                        done = {
                            "type": "done",
                            "id": rid,
                            "finish_reason": ev.finish_reason,
                            "sample_rate": SAMPLE_RATE,
                        }
                        await ws.send_json(done)
                continue
            return  # websocket_errors rendered an error (or the client left): the socket is closed

    return router
