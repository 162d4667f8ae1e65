"""The reference server's routes, one module per transport; each `routes(service, limits)` returns an
`APIRouter` that `omni_errors_tools.pipeline.app.build_app` includes.

Each route declares the error statuses it answers itself (`responses=error_responses(...)`);
`build_app` adds those every operation can answer (`omni_errors.server.openapi.document_errors`).

Every route reads top to bottom the same way: the request is validated into a stage-0 payload
(`schemas`), submitted (`Service.submit`, so a dead pipeline is an HTTP error before any byte),
its events are read (`Service.events` / `Service.collect`), and rendered by the transport. Errors
are never rendered here: they escape to `omni_errors.server.install` (HTTP), `sse_guard` (a stream
after its headers), `websocket_errors` (WebSocket), or the job store (`JobStore.fail`).
"""

from __future__ import annotations

from typing import Any

from omni_errors_tools.pipeline.request_ids import acceptable_id, request_id

__all__ = ["AUDIO_200", "FAULT_HEADER", "acceptable_id", "request_id"]

FAULT_HEADER = "x-omni-fault"
#: The 200 of a route answering audio, for its `responses=` (FastAPI would say JSON).
AUDIO_200: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The audio",
        "content": {m: {"schema": {"type": "string", "format": "binary"}} for m in ("audio/wav", "audio/pcm")},
    }
}
