"""The OpenAI-shaped API over the pipeline: vLLM's metrics router, omni_errors' handlers, the routes.

Each transport's routes are one module of `omni_errors_tools.pipeline.routes` (chat JSON + SSE, speech,
jobs, WebSocket, health and models); `/metrics` is vLLM's own. Every error leaves through
`omni_errors.server.install` (HTTP), `sse_guard` (streams after their headers) or
`websocket_errors` (WebSocket), all of which report through `omni_errors.semantics.reporting`;
each answer of a request given an id carries it in `x-request-id` (`RequestIdHeader`).
A body over `Limits.max_body_bytes` is answered 413 before it is read (`BodyLimit`, inside the
instrumentation so that the 413 is counted). `/openapi.json` states every error status each
operation answers, with the one `ErrorResponse` schema (`document_errors`); `/metrics` answers
GET and HEAD only.
"""

from __future__ import annotations

from fastapi import FastAPI
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.server import BodyLimit, document_errors, install
from omni_errors_tools.pipeline.request_ids import RequestIdHeader
from omni_errors_tools.pipeline.routes import chat, health, jobs, speech, websocket
from omni_errors_tools.pipeline.schemas import Limits
from omni_errors_tools.pipeline.service import Service
from starlette.exceptions import HTTPException
from starlette.routing import Mount
from starlette.types import ASGIApp, Receive, Scope, Send
from vllm.entrypoints.serve.instrumentator.metrics import attach_router

__all__ = ["build_app"]


def build_app(service: Service, limits: Limits, *, retry_after_s: int = RETRY_AFTER_S) -> FastAPI:
    app = FastAPI(title="omni-errors reference pipeline", docs_url=None, redoc_url=None)
    app.add_middleware(BodyLimit, max_body_bytes=limits.max_body_bytes)  # first: inside the instrumentation
    attach_router(app)  # vLLM's Prometheus instrumentation and /metrics
    for route in app.routes:
        if isinstance(route, Mount) and route.path == "/metrics":
            route.app = _ReadOnly(route.app)
    install(app, retry_after_s=retry_after_s)
    for module in (health, chat, speech, jobs, websocket):
        app.include_router(module.routes(service, limits))
    document_errors(app, every_operation=(413, 500))
    app.add_middleware(RequestIdHeader)  # outermost: every answer, the instrumentation's own included
    return app


class _ReadOnly:
    """prometheus-client's ASGI app, which vLLM mounts at /metrics, answers any method with the
    metrics (a TRACE or DELETE included); here anything but GET and HEAD is Starlette's own 405."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in ("GET", "HEAD"):
            raise HTTPException(405, headers={"Allow": "GET, HEAD"})
        await self.app(scope, receive, send)
