"""Async speech jobs: `POST /v1/jobs` queues one, a task runs it through the pipeline, and the
outcome is stored in `omni_errors.render.jobs.JobStore` (the canonical record for a failure).

Conflicts are 409 (`OmniConflictError`): creating a job with an id that exists, reading the
content of a job that has not completed. Unknown ids are 404 (the store's `VLLMNotFoundError`).
"""

from __future__ import annotations

import asyncio
import uuid

from omni_errors.exceptions import OmniConflictError
from omni_errors.pipeline.audio import wav_bytes
from omni_errors.pipeline.protocol import JobRequest, Limits, speech_payload
from omni_errors.pipeline.service import Service
from omni_errors.render.jobs import Job, JobStore

__all__ = ["Jobs"]


class Jobs:
    def __init__(self, service: Service, limits: Limits) -> None:
        self.service = service
        self.limits = limits
        self.store = JobStore()
        self._ids: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    def create(self, req: JobRequest, fault_header: str | None) -> Job:
        payload = speech_payload(req, self.limits, fault_header)
        job_id = req.id or f"job-{uuid.uuid4().hex}"
        if len(job_id) > 128 or not job_id.isprintable():
            from vllm.exceptions import VLLMValidationError

            raise VLLMValidationError("id must be at most 128 printable characters", parameter="id")
        if job_id in self._ids:
            raise OmniConflictError("a job with this id already exists")
        rid = self.service.submit(payload, job_id)
        self._ids.add(job_id)
        job = self.store.create(job_id)
        self.store.start(job_id)
        task = asyncio.create_task(self._run(job_id, rid, req.response_format), name=f"job-{job_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return job

    async def _run(self, job_id: str, rid: str, fmt: str) -> None:
        pcm: list[bytes] = []
        try:
            async for ev in self.service.events(rid):
                if ev.kind == "audio":
                    pcm.append(ev.pcm)
        except Exception as exc:
            self.store.fail(job_id, exc)  # reported there: counted and logged once
            return
        data = b"".join(pcm)
        if fmt == "pcm":
            self.store.complete(job_id, data, "audio/pcm")
        else:
            self.store.complete(job_id, wav_bytes(data), "audio/wav")
