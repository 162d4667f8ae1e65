"""The OpenAI-shaped API over the pipeline. Every error leaves through `omni_errors.server.install`
(HTTP), `sse_guard` (streams after their headers) or `websocket_errors` (WebSocket).

Routes: `POST /v1/chat/completions` (stream or not), `POST /v1/audio/speech` (WAV/PCM),
`POST /v1/jobs`, `GET /v1/jobs/{id}`, `GET /v1/jobs/{id}/content`, `WS /v1/chat/ws`,
`GET /v1/models`, `GET /health`, `GET /metrics`.
"""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import FastAPI, Header, WebSocket
from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError
from starlette.responses import JSONResponse, Response, StreamingResponse
from vllm.entrypoints.serve.instrumentator.metrics import attach_router
from vllm.exceptions import VLLMValidationError

from omni_errors.exceptions import OmniServiceUnavailableError
from omni_errors.pipeline.audio import wav_bytes
from omni_errors.pipeline.jobs import Jobs
from omni_errors.pipeline.models import SAMPLE_RATE, detokenize
from omni_errors.pipeline.protocol import (
    ChatRequest,
    JobRequest,
    Limits,
    SpeechRequest,
    chat_payload,
    speech_payload,
)
from omni_errors.pipeline.service import Event, Service
from omni_errors.render.jobs import job_content, job_metadata_response
from omni_errors.render.sse import SSE_DONE, sse_guard
from omni_errors.render.websocket import websocket_errors
from omni_errors.server import install

__all__ = ["build_app"]

FAULT_HEADER = "x-omni-fault"


def _request_id(prefix: str, header: str | None) -> str:
    if header and len(header) <= 128 and header.isprintable():
        return header
    return f"{prefix}-{uuid.uuid4().hex}"


def _chunk(rid: str, model: str, created: int, delta: dict[str, Any], finish: str | None = None) -> str:
    body = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(body, separators=(',', ':'))}\n\n"


def build_app(service: Service, limits: Limits) -> FastAPI:
    app = FastAPI(title="omni-errors reference pipeline", docs_url=None, redoc_url=None)
    attach_router(app)  # vLLM's Prometheus instrumentation and /metrics
    install(app)
    jobs = Jobs(service, limits)
    app.state.jobs = jobs

    @app.get("/health")
    async def health() -> Response:
        h = service.supervisor.health()
        if not h.ok:
            stage = h.error.stage_id if h.error is not None else None
            raise OmniServiceUnavailableError(f"the pipeline is {h.state}", stage_id=stage)
        return JSONResponse({"status": "ok"})

    @app.get("/v1/models")
    async def models() -> Response:
        card = {"id": limits.model, "object": "model", "created": 0, "owned_by": "omni-errors"}
        return JSONResponse({"object": "list", "data": [card]})

    async def collect(rid: str) -> tuple[list[int], bytes, Event]:
        tokens: list[int] = []
        pcm: list[bytes] = []
        last = Event("done")
        async for ev in service.events(rid):
            if ev.kind == "token":
                tokens.append(ev.token)
            elif ev.kind == "audio":
                pcm.append(ev.pcm)
            else:
                last = ev
        return tokens, b"".join(pcm), last

    @app.post("/v1/chat/completions")
    async def chat(
        req: ChatRequest,
        x_request_id: str | None = Header(default=None),
        x_omni_fault: str | None = Header(default=None),
    ) -> Response:
        payload = chat_payload(req, limits, x_omni_fault)
        rid = service.submit(payload, _request_id("chatcmpl", x_request_id))
        created = int(time.time())
        if req.stream:
            return StreamingResponse(
                sse_guard(_stream(rid, req.model, created, payload["audio"]), request_id=rid),
                media_type="text/event-stream",
                headers={"x-request-id": rid},
            )
        tokens, pcm, last = await collect(rid)
        message: dict[str, Any] = {"role": "assistant", "content": "".join(map(detokenize, tokens))}
        if payload["audio"]:
            message["audio"] = {
                "id": f"audio-{rid}",
                "format": "wav",
                "data": base64.b64encode(wav_bytes(pcm)).decode(),
            }
        body = {
            "id": rid,
            "object": "chat.completion",
            "created": created,
            "model": req.model,
            "choices": [{"index": 0, "message": message, "finish_reason": last.finish_reason}],
            "usage": {
                "prompt_tokens": len(payload["prompt"]),
                "completion_tokens": len(tokens),
                "total_tokens": len(payload["prompt"]) + len(tokens),
            },
        }
        return JSONResponse(body, headers={"x-request-id": rid})

    async def _stream(rid: str, model: str, created: int, audio: bool) -> AsyncIterator[str]:
        # A failure escapes to `sse_guard`, which reports it (one log line for a stage's failure).
        yield _chunk(rid, model, created, {"role": "assistant", "content": ""})
        async for ev in service.events(rid):
            if ev.kind == "token":
                yield _chunk(rid, model, created, {"content": detokenize(ev.token)})
            elif ev.kind == "audio":
                yield _chunk(rid, model, created, {"audio": {"data": base64.b64encode(ev.pcm).decode()}})
            else:
                yield _chunk(rid, model, created, {}, ev.finish_reason)
        yield SSE_DONE

    @app.post("/v1/audio/speech")
    async def speech(
        req: SpeechRequest,
        x_request_id: str | None = Header(default=None),
        x_omni_fault: str | None = Header(default=None),
    ) -> Response:
        payload = speech_payload(req, limits, x_omni_fault)
        rid = service.submit(payload, _request_id("speech", x_request_id))
        _, pcm, _ = await collect(rid)
        if req.response_format == "pcm":
            return Response(pcm, media_type="audio/pcm", headers={"x-request-id": rid})
        return Response(wav_bytes(pcm), media_type="audio/wav", headers={"x-request-id": rid})

    @app.post("/v1/jobs")
    async def create_job(req: JobRequest, x_omni_fault: str | None = Header(default=None)) -> Response:
        job = jobs.create(req, x_omni_fault)
        return job_metadata_response(job)

    @app.get("/v1/jobs/{job_id}")
    async def get_job(job_id: str) -> Response:
        return job_metadata_response(jobs.store.get(job_id))

    @app.get("/v1/jobs/{job_id}/content")
    async def get_job_content(job_id: str) -> Response:
        return job_content(jobs.store.get(job_id))

    @app.websocket("/v1/chat/ws")
    async def chat_ws(ws: WebSocket) -> None:
        """One JSON chat request per message; events back; `{"type": "done"}` ends each request."""
        await ws.accept()
        fault_header = ws.headers.get(FAULT_HEADER)
        while True:
            async with websocket_errors(ws):
                text = await ws.receive_text()
                try:
                    req = ChatRequest.model_validate_json(text)
                except ValidationError as exc:
                    if any(e.get("type") == "json_invalid" for e in exc.errors()):
                        raise VLLMValidationError("the message is not valid JSON", parameter="body") from None
                    raise RequestValidationError(exc.errors(include_input=False)) from None
                payload = chat_payload(req, limits, fault_header)
                rid = service.submit(payload, _request_id("chatws", None))
                async for ev in service.events(rid):
                    if ev.kind == "token":
                        await ws.send_json({"type": "text.delta", "id": rid, "delta": detokenize(ev.token)})
                    elif ev.kind == "audio":
                        await ws.send_json(
                            {"type": "audio.delta", "id": rid, "data": base64.b64encode(ev.pcm).decode()}
                        )
                    else:
                        await ws.send_json(
                            {"type": "done", "id": rid, "finish_reason": ev.finish_reason, "sample_rate": SAMPLE_RATE}
                        )
                continue
            return  # websocket_errors rendered an error (or the client left): the socket is closed

    return app
