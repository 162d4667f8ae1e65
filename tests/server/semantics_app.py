# vLLM's GracefulHTTPError subclasses have an untyped __init__:
# mypy: disable-error-code="no-untyped-call"
"""The app the server tests run: every exception type on every transport.

The app is wired the way vLLM wires its API server: vLLM's own `attach_router` (Prometheus
instrumentator + `/metrics`), then `omni_errors.server.install`. `/nofallback` is a mounted app
installed with `raw_fallbacks=False`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import torch
import vllm.exceptions
from fastapi import FastAPI, HTTPException, Request, WebSocket
from fastapi.exceptions import RequestValidationError
from omni_errors import OmniErrorDetails
from omni_errors.render.jobs import JobStore, job_content, job_metadata, job_metadata_response
from omni_errors.render.sse import sse_guard
from omni_errors.render.websocket import websocket_errors
from omni_errors.semantics.core_table import DEAD_MESSAGE
from omni_errors.semantics.exceptions import (
    GuardrailViolationError,
    OmniClientError,
    OmniConflictError,
    OmniEngineDeadError,
    OmniEngineGenerateError,
    OmniNotImplementedError,
    OmniServerError,
    OmniServiceUnavailableError,
    OmniStageTimeoutError,
)
from omni_errors.server import BodyLimit, install
from pydantic import BaseModel
from starlette.responses import JSONResponse, Response, StreamingResponse
from torch._inductor.exc import InductorError
from vllm.entrypoints.serve.instrumentator.metrics import attach_router
from vllm.exceptions import (
    GenerationError,
    LoRAAdapterNotFoundError,
    QueueOverflowError,
    VLLMClientError,
    VLLMNotFoundError,
    VLLMServerError,
    VLLMUnprocessableEntityError,
    VLLMValidationError,
)
from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

DEAD = DEAD_MESSAGE
BODY_LIMIT = 4096  # bytes; `BodyLimit` answers 413 above it
# vLLM >= 0.31 only; their cases are left out on vLLM 0.30 (the vLLM-Omni environment).
ChatTemplateResolutionError = getattr(vllm.exceptions, "ChatTemplateResolutionError", None)
ProfilerAlreadyActiveError = getattr(vllm.exceptions, "ProfilerAlreadyActiveError", None)
RetryableRequestError = getattr(vllm.exceptions, "RetryableRequestError", None)
# vLLM >= 0.34 only.
EngineFaultedError = getattr(vllm.exceptions, "EngineFaultedError", None)
SECRET = "sk-proj-Zq9XwV8uT7sR6pO5nM4lK3jI2hG1fE0d"  # a rejected value: must never be echoed


@dataclass(frozen=True)
class Server:
    """Where the test server listens."""

    base: str
    ws_base: str


@dataclass(frozen=True)
class Case:
    """One exception type and what every transport must render for it."""

    make: Callable[[], BaseException]
    status: int
    type: str
    message: str
    param: str | None = None
    stage_id: int | None = None


class _CustomError(Exception):
    """An exception type no handler is registered for."""


def _validation_error() -> RequestValidationError:
    return RequestValidationError(
        [{"type": "missing", "loc": ("body", "model"), "msg": "Field required", "input": {"api_key": SECRET}}]
    )


# fmt: off
CASES: dict[str, Case] = {
    "validation": Case(lambda: VLLMValidationError("temperature must be >= 0", parameter="temperature", value=SECRET),
                       400, "BadRequestError", "temperature must be >= 0", "temperature"),
    "unprocessable": Case(lambda: VLLMUnprocessableEntityError("image could not be decoded", parameter="image_url"),
                          422, "UnprocessableEntityError", "image could not be decoded", "image_url"),
    "not_found": Case(lambda: VLLMNotFoundError("voice alto does not exist"), 404, "NotFoundError",
                      "voice alto does not exist"),
    "lora_not_found": Case(lambda: LoRAAdapterNotFoundError("sql", "sql-adapter"), 404, "NotFoundError",
                           "Loading lora sql failed: No adapter found for sql-adapter"),
    "client": Case(lambda: VLLMClientError("bad request"), 400, "BadRequestError", "bad request"),
    "queue_overflow": Case(QueueOverflowError, 503, "ServiceUnavailableError", QueueOverflowError().message),
    "generation": Case(GenerationError, 500, "InternalServerError", "Internal server error"),
    "engine_generate": Case(lambda: EngineGenerateError("generate failed"), 500, "InternalServerError",
                            "generate failed"),
    "engine_dead": Case(EngineDeadError, 500, "InternalServerError", DEAD),
    "server": Case(lambda: VLLMServerError("server fault"), 500, "InternalServerError", "server fault"),
    "guardrail": Case(lambda: GuardrailViolationError("blocked by policy", parameter="messages"), 400,
                      "BadRequestError", "blocked by policy", "messages"),
    "conflict": Case(lambda: OmniConflictError("job is still running"), 409, "ConflictError", "job is still running"),
    "not_implemented": Case(lambda: OmniNotImplementedError("no streaming for this model"), 501,
                            "NotImplementedError", "no streaming for this model"),
    "unavailable": Case(lambda: OmniServiceUnavailableError("stage 2 is down", stage_id=2), 503,
                        "ServiceUnavailableError", "stage 2 is down", stage_id=2),
    "unavailable_retry": Case(lambda: OmniServiceUnavailableError("stage 2 has no replica", stage_id=2, retry_after=7),
                              503, "ServiceUnavailableError", "stage 2 has no replica", stage_id=2),
    "stage_timeout": Case(lambda: OmniStageTimeoutError("stage 1 deadline expired", stage_id=1), 504,
                          "GatewayTimeoutError", "stage 1 deadline expired", stage_id=1),
    "omni_generate": Case(lambda: OmniEngineGenerateError("vocoder failed", stage_id=3), 500, "InternalServerError",
                          "vocoder failed", stage_id=3),
    "omni_dead": Case(lambda: OmniEngineDeadError(stage_id=4), 500, "InternalServerError", DEAD, stage_id=4),
    "omni_client": Case(lambda: OmniClientError("payload too large", status_code=413,
                                                error_type="RequestEntityTooLargeError"),
                        413, "RequestEntityTooLargeError", "payload too large"),
    "omni_server": Case(lambda: OmniServerError("stage crashed", stage_id=5), 500, "InternalServerError",
                        "stage crashed", stage_id=5),
    "rebuilt_client": Case(lambda: OmniClientError.from_details(
                               OmniErrorDetails("bad voice", "client", 400, "BadRequestError", parameter="voice",
                                                stage_id=1)),
                           400, "BadRequestError", "bad voice", "voice", 1),
    "http_404": Case(lambda: HTTPException(404), 404, "NotFoundError", "Not Found"),
    "http_429": Case(lambda: HTTPException(429, "slow down"), 429, "TooManyRequestsError", "slow down"),
    # Headers a route sets on its HTTPException reach the client (the envelope's framing stays its own).
    "http_401": Case(lambda: HTTPException(401, headers={"WWW-Authenticate": 'Bearer realm="omni"'}), 401,
                     "UnauthorizedError", "Unauthorized"),
    "http_429_headers": Case(lambda: HTTPException(429, "slow down", headers={
                                 "Retry-After": "30", "X-RateLimit-Remaining": "0", "Content-Length": "999999"}),
                             429, "TooManyRequestsError", "slow down"),
    "request_validation": Case(_validation_error, 400, "BadRequestError", "1 validation error:\n  body.model: "
                               "Field required", "model"),
    "oom": Case(lambda: torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), 500,
                "InternalServerError", DEAD),
    "cuda_oom": Case(lambda: torch.cuda.OutOfMemoryError("out of memory"), 500, "InternalServerError", DEAD),
    "inductor": Case(lambda: InductorError(RuntimeError("triton failed"), None), 500, "InternalServerError", DEAD),
    "raw_value": Case(lambda: ValueError("raw value"), 400, "BadRequestError", "raw value"),
    "raw_type": Case(lambda: TypeError("raw type"), 400, "BadRequestError", "raw type"),
    "raw_overflow": Case(lambda: OverflowError("raw overflow"), 400, "BadRequestError", "raw overflow"),
    "raw_not_implemented": Case(lambda: NotImplementedError("raw not implemented"), 501, "NotImplementedError",
                                "raw not implemented"),
    "timeout": Case(asyncio.TimeoutError, 500, "InternalServerError", "Internal Server Error"),
    "unknown": Case(lambda: KeyError("missing key"), 500, "InternalServerError", "missing key"),
    "runtime": Case(lambda: RuntimeError("worker crashed"), 500, "InternalServerError", "worker crashed"),
    # No concrete handler: reaches the `Exception` safety net (ServerErrorMiddleware / WebSocketSafetyNet).
    "custom": Case(lambda: _CustomError("custom failure"), 500, "InternalServerError", "custom failure"),
}
# fmt: on

if ChatTemplateResolutionError is not None:
    CASES["chat_template"] = Case(
        lambda: ChatTemplateResolutionError("no chat template"), 400, "BadRequestError", "no chat template"
    )
if ProfilerAlreadyActiveError is not None:
    CASES["profiler_active"] = Case(
        ProfilerAlreadyActiveError, 409, "ConflictError", ProfilerAlreadyActiveError().message
    )
if RetryableRequestError is not None:
    CASES["retryable"] = Case(RetryableRequestError, 503, "ServiceUnavailableError", "Request failed; please retry")
if EngineFaultedError is not None:
    CASES["engine_faulted"] = Case(EngineFaultedError, 503, "ServiceUnavailableError", EngineFaultedError().message)

# Raw fallbacks switched off: only the four raw types change.
NO_FALLBACK = {
    "raw_value": Case(lambda: ValueError("raw value"), 500, "InternalServerError", "raw value"),
    "raw_type": Case(lambda: TypeError("raw type"), 500, "InternalServerError", "raw type"),
    "raw_overflow": Case(lambda: OverflowError("raw overflow"), 500, "InternalServerError", "raw overflow"),
    "raw_not_implemented": Case(lambda: NotImplementedError("raw"), 500, "InternalServerError", "raw"),
    "validation": CASES["validation"],
}


FATAL_SEEN: list[OmniErrorDetails] = []  # what the on_fatal hook received


class Body(BaseModel):
    model: str
    temperature: float = 1.0


def _request_id(request: Request | WebSocket) -> str | None:
    return request.headers.get("x-request-id")


def build_app() -> FastAPI:
    app = FastAPI()
    app.add_middleware(BodyLimit, max_body_bytes=BODY_LIMIT)  # before attach_router: inside the instrumentation
    attach_router(app)  # vLLM's wiring: Instrumentator(...).instrument(app).expose(app) + /metrics mount
    install(app, on_fatal=FATAL_SEEN.append)
    store = JobStore()

    @app.get("/http/{name}")
    async def http_route(name: str) -> JSONResponse:
        raise CASES[name].make()

    @app.get("/sse/{name}")
    async def sse_route(name: str, request: Request) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            yield 'data: {"delta": "hi"}\n\n'
            raise CASES[name].make()

        return StreamingResponse(sse_guard(events(), request_id=_request_id(request)), media_type="text/event-stream")

    @app.websocket("/ws/{name}")
    async def ws_route(websocket: WebSocket, name: str) -> None:
        await websocket.accept()
        async with websocket_errors(websocket, request_id=_request_id(websocket)):
            await websocket.send_json({"type": "delta", "text": "hi"})
            raise CASES[name].make()

    @app.websocket("/ws-handler/{name}")
    async def ws_handler_route(websocket: WebSocket, name: str) -> None:
        await websocket.accept()
        await websocket.send_json({"type": "delta", "text": "hi"})
        raise CASES[name].make()  # rendered by the installed exception handler

    @app.post("/v1/body")
    async def body_route(body: Body) -> dict[str, str]:
        return {"model": body.model}

    @app.post("/jobs")
    async def create_job(fail: str | None = None) -> dict[str, object]:
        job = store.create()
        if fail is None:
            store.complete(job.id, b"\x00video-bytes", "video/mp4")
        else:
            store.fail(job.id, CASES[fail].make())
        return job_metadata(job)

    @app.post("/jobs/pending")
    async def create_pending_job() -> dict[str, object]:
        job = store.create()
        store.start(job.id)
        return job_metadata(job)

    @app.get("/jobs/{job_id}")
    async def get_job(job_id: str) -> JSONResponse:
        return job_metadata_response(store.get(job_id))

    @app.get("/jobs/{job_id}/content")
    async def get_job_content(job_id: str) -> Response:
        return job_content(store.get(job_id))

    sub = FastAPI()
    install(sub, raw_fallbacks=False)

    @sub.get("/http/{name}")
    async def no_fallback_route(name: str) -> JSONResponse:
        raise NO_FALLBACK[name].make()

    app.mount("/nofallback", sub)
    return app
