"""Async jobs (video, batch): the failure is stored once, as the canonical record, and read back as is.

- metadata of a failed job: HTTP 200 with the embedded `error` object, the whole record (as OpenAI's
  batch and video APIs do): the metadata request itself succeeded, and the job it describes failed;
- content of a failed job: the stored status and envelope, never a re-guessed one;
- content of a job that has not finished: 409 (`OmniConflictError`); an unknown job id: 404.

`JobStore` keeps the record's frame; a server that stores the embedded `error` object instead
(vLLM-Omni's video jobs) answers a failed job's content with `stored_error_response`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal

from starlette.responses import JSONResponse, Response

from omni_errors._native import OmniErrorDetails, decode, encode
from omni_errors.render import error_info
from omni_errors.render.http import http_response
from omni_errors.semantics.reporting import report

__all__ = [
    "Job",
    "JobStatus",
    "JobStore",
    "job_content",
    "job_metadata",
    "job_metadata_response",
    "stored_error_response",
]

JobStatus = Literal["queued", "in_progress", "completed", "failed"]


@dataclass
class Job:
    """One job. A failure is kept as the record's frame bytes: what a persistent store would hold."""

    id: str
    status: JobStatus = "queued"
    created_at: int = field(default_factory=lambda: int(time.time()))
    content: bytes | None = None
    media_type: str = "application/octet-stream"
    error_frame: bytes | None = None

    @property
    def error(self) -> OmniErrorDetails | None:
        """The stored record, decoded from its frame."""
        return None if self.error_frame is None else decode(self.error_frame)


class JobStore:
    """In-memory, thread-safe job table (a reference; production stores persist `Job.error_frame`)."""

    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()

    def create(self, job_id: str | None = None) -> Job:
        job = Job(id=job_id or f"job-{uuid.uuid4().hex}")
        with self._lock:
            self._jobs[job.id] = job
        return job

    def exists(self, job_id: str) -> bool:
        with self._lock:
            return job_id in self._jobs

    def get(self, job_id: str) -> Job:
        """The job; an unknown id raises `VLLMNotFoundError` (404)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            from vllm.exceptions import VLLMNotFoundError

            raise VLLMNotFoundError(f"job {job_id} not found")
        return job

    def start(self, job_id: str) -> None:
        self.get(job_id).status = "in_progress"

    def complete(self, job_id: str, content: bytes, media_type: str = "application/octet-stream") -> None:
        job = self.get(job_id)
        job.content, job.media_type, job.status = content, media_type, "completed"

    def fail(
        self, job_id: str, error: BaseException | OmniErrorDetails, *, stage_id: int | None = None
    ) -> OmniErrorDetails:
        """Report the failure (an exception is classified, a record kept as is) and store it; returns the record."""
        job = self.get(job_id)
        return report(error, partial(_store, job), where=f"job {job_id}", request_id=job_id, stage_id=stage_id)


def _store(job: Job, details: OmniErrorDetails) -> OmniErrorDetails:
    job.error_frame, job.status = encode(details), "failed"
    return details


def job_metadata(job: Job) -> dict[str, Any]:
    """The metadata body (served with 200); a failed job embeds the nested `error` object."""
    body: dict[str, Any] = {"id": job.id, "object": "job", "status": job.status, "created_at": job.created_at}
    error = job.error
    body["error"] = None if error is None else error_info(error)
    return body


def job_content(job: Job) -> Response:
    """The content response: the stored status for a failed job, 409 while it has not completed."""
    error = job.error
    if error is not None:
        return http_response(error)
    if job.status != "completed" or job.content is None:
        from omni_errors.semantics.exceptions import OmniConflictError

        raise OmniConflictError(f"job {job.id} is {job.status}; content is not available yet")
    return Response(job.content, media_type=job.media_type)


def job_metadata_response(job: Job) -> JSONResponse:
    """`job_metadata` as a 200 response."""
    return JSONResponse(job_metadata(job), status_code=200)


def stored_error_response(error: Mapping[str, Any]) -> JSONResponse:
    """A failed job's content, from the `error` object it stored (`error_info`'s fields: `message`,
    `type`, `param`, `code`, `request_id`, `stage_id`): the stored status and envelope.

    The object carries a status, not a category: it is read as vLLM-Omni's flat carriers are
    (`semantics.legacy`), so a stored 4xx stays the client's and a 5xx the server's."""
    from omni_errors.semantics.legacy import from_error_message

    fields = {
        "error": error.get("message"),
        "status_code": error.get("code"),
        "error_type": error.get("type"),
        "param": error.get("param"),
        "request_id": error.get("request_id"),
        "stage_id": error.get("stage_id"),
    }
    return http_response(from_error_message(fields))
