"""Async speech jobs: `POST /v1/jobs` queues one, `GET /v1/jobs/{id}` reads its metadata (200, with
the record embedded once failed), `GET /v1/jobs/{id}/content` its audio (or the stored record's
status and envelope): docs/errors.md, "Async jobs"; both declared in `/openapi.json`.

The request goes to the service like any other; a task reads its stream into the job store
(`omni_errors.render.jobs.JobStore`, which keeps a failure as its canonical record). Conflicts are
409 (`OmniConflictError`): an id that exists, content of a job that has not completed. Unknown ids
are 404 (the store's `VLLMNotFoundError`).
"""

from __future__ import annotations

import asyncio
import uuid

from fastapi import APIRouter, Header
from omni_errors import MAX_REQUEST_ID_LEN
from omni_errors.render.jobs import JobStore, job_content, job_metadata_response
from omni_errors.semantics.exceptions import OmniConflictError
from omni_errors.server.openapi import error_responses, job_responses
from omni_errors_tools.pipeline.audio import audio_response_body
from omni_errors_tools.pipeline.routes import AUDIO_200, acceptable_id
from omni_errors_tools.pipeline.schemas import JobRequest, Limits, speech_payload
from omni_errors_tools.pipeline.service import Service
from starlette.responses import Response
from vllm.exceptions import VLLMValidationError

__all__ = ["routes"]


def routes(service: Service, limits: Limits) -> APIRouter:
    router = APIRouter()
    store = JobStore()
    tasks: set[asyncio.Task[None]] = set()

    async def run(job_id: str, fmt: str) -> None:
        try:
            result = await service.collect(job_id)
        except Exception as exc:  # omni-errors: ignore[OE202]: stored as the job's record (counted and logged once)
            store.fail(job_id, exc)  # reported there: counted and logged once
            return
        store.complete(job_id, *audio_response_body(result.pcm, fmt))

    @router.post("/v1/jobs", responses={**job_responses(), **error_responses(404, 409, 503)})
    async def create_job(req: JobRequest, x_omni_fault: str | None = Header(default=None)) -> Response:
        payload = speech_payload(req, limits, x_omni_fault)
        job_id = req.id or f"job-{uuid.uuid4().hex}"
        if not acceptable_id(job_id):
            raise VLLMValidationError(f"id must be printable and at most {MAX_REQUEST_ID_LEN} bytes", parameter="id")
        if store.exists(job_id):
            raise OmniConflictError("a job with this id already exists")
        service.submit(payload, job_id)
        job = store.create(job_id)
        store.start(job_id)
        task = asyncio.create_task(run(job_id, req.response_format), name=f"job-{job_id}")
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return job_metadata_response(job)

    @router.get("/v1/jobs/{job_id}", responses={**job_responses(), **error_responses(404)})
    async def get_job(job_id: str) -> Response:
        return job_metadata_response(store.get(job_id))

    # A failed job's content answers its stored record's status (400 included: a stage's client error).
    @router.get("/v1/jobs/{job_id}/content", responses={**AUDIO_200, **error_responses(400, 404, 409, 503, 504)})
    async def get_job_content(job_id: str) -> Response:
        return job_content(store.get(job_id))

    return router
