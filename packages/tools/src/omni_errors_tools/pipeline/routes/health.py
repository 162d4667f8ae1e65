"""`GET /health` (503 once the pipeline is not serving) and `GET /v1/models`.

A 503 of `/health` raises its record (`rebuild`), not a fresh exception: the failure that ended the
pipeline was logged with its traceback where it happened, so each probe logs one line, never a
traceback (a probe every few seconds would fill the log).
"""

from __future__ import annotations

from fastapi import APIRouter
from omni_errors.semantics.core_table import unavailable_record
from omni_errors.semantics.exceptions import rebuild
from omni_errors.server.openapi import error_responses
from omni_errors_tools.pipeline.schemas import Limits
from omni_errors_tools.pipeline.service import Service
from starlette.responses import JSONResponse, Response

__all__ = ["routes"]


def routes(service: Service, limits: Limits) -> APIRouter:
    router = APIRouter()

    @router.get("/health", responses=error_responses(503))
    async def health() -> Response:
        h = service.supervisor.health()
        if not h.ok:
            stage = h.error.stage_id if h.error is not None else None
            raise rebuild(unavailable_record(f"the pipeline is {h.state.value}", stage_id=stage))
        return JSONResponse({"status": "ok"})

    @router.get("/v1/models")
    async def models() -> Response:
        card = {"id": limits.model, "object": "model", "created": 0, "owned_by": "omni-errors"}
        return JSONResponse({"object": "list", "data": [card]})

    return router
