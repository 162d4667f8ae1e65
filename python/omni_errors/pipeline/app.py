"""The OpenAI-shaped API over the pipeline: vLLM's metrics router, omni_errors' handlers, the routes.

Each transport's routes are one module of `omni_errors.pipeline.routes` (chat JSON + SSE, speech,
jobs, WebSocket, health and models); `/metrics` is vLLM's own. Every error leaves through
`omni_errors.server.install` (HTTP), `sse_guard` (streams after their headers) or
`websocket_errors` (WebSocket), all of which report through `omni_errors.semantics.reporting`.
"""

from __future__ import annotations

from fastapi import FastAPI
from vllm.entrypoints.serve.instrumentator.metrics import attach_router

from omni_errors.pipeline.routes import chat, health, jobs, speech, websocket
from omni_errors.pipeline.schemas import Limits
from omni_errors.pipeline.service import Service
from omni_errors.server import install

__all__ = ["build_app"]


def build_app(service: Service, limits: Limits) -> FastAPI:
    app = FastAPI(title="omni-errors reference pipeline", docs_url=None, redoc_url=None)
    attach_router(app)  # vLLM's Prometheus instrumentation and /metrics
    install(app)
    for module in (health, chat, speech, jobs, websocket):
        app.include_router(module.routes(service, limits))
    return app
