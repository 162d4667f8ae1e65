"""Async video jobs, read back the way docs/errors.md says every job is (as the upstream series does):

- a failure is stored as its whole record (`make_video_error`): vLLM-Omni's `VideoError` (`code`,
  `message`) with the record's other public fields (`RecordFields`: `type`, `param`, `request_id`,
  `stage_id`), as `omni_errors.render.error_info` writes them, classified without raw fallbacks;
- `GET /v1/videos/{id}` answers 200 with the video object whatever the job's status; a failed job's
  `error` is its record (`make_retrieve_video`; vLLM-Omni 0.30 answered the stored status);
- `GET /v1/videos/{id}/content` of a failed job answers the stored record: its status, its envelope
  (`make_download_video`; vLLM-Omni 0.30 answered 422 whatever the failure);
- `/openapi.json` says so (`document_video_jobs`): the retrieval's 200 is `VideoResponse`, whose
  `VideoError` has the record's fields.

vLLM's router registered the original routes when the module was imported: each route is pointed at
its replacement before the app includes the router (as `/health` is).
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import Any

from omni_errors import OmniErrorDetails
from pydantic import BaseModel

from omni_errors_vllm_omni.patching import point_route

__all__ = ["RecordFields", "document_video_jobs", "make_download_video", "make_retrieve_video", "make_video_error"]

_RETRIEVE = ("get", "/v1/videos/{video_id}")


class RecordFields(BaseModel):
    """The record's public fields beside `VideoError`'s `code` and `message`; None where a job failed
    before they were stored (an error vLLM-Omni stored itself)."""

    type: str | None = None
    param: str | None = None
    request_id: str | None = None
    stage_id: int | None = None


def make_video_error(module: ModuleType, original: Any) -> Any:
    """`video.generation.helpers._video_error_from_exception`: a failed job stores its whole record."""
    from omni_errors.render import error_info
    from omni_errors.semantics.reporting import report

    class VideoError(RecordFields, module.VideoError):  # type: ignore[misc, name-defined]
        """vLLM-Omni's `VideoError` with the rest of the record."""

    def stored(details: OmniErrorDetails) -> Any:
        return VideoError(**error_info(details))

    def _video_error_from_exception(exc: Exception) -> Any:
        # The job was accepted (200, queued) before it ran: whatever fails now is the server's.
        return report(exc, stored, where="video job", raw_fallbacks=False)

    return _video_error_from_exception


def _failed_job(module: ModuleType, job: Any) -> bool:
    return job is not None and job.status == module.VideoGenerationStatus.FAILED and job.error is not None


def make_retrieve_video(module: ModuleType, original: Any) -> Any:
    """`api_server.retrieve_video` (the route's endpoint): 200 with the video object for every status."""
    from fastapi.responses import JSONResponse

    @functools.wraps(original)
    async def retrieve_video(video_id: str) -> Any:
        job = await module.VIDEO_STORE.get(video_id)
        if not _failed_job(module, job):
            return await original(video_id)
        content = job.model_dump(mode="json")
        content["error"] = job.error.model_dump(mode="json")  # a stored record's own fields, all of them
        return JSONResponse(content=content, status_code=200)

    point_route(module.router, original, retrieve_video)
    return retrieve_video


def make_download_video(module: ModuleType, original: Any) -> Any:
    """`api_server.download_video` (the route's endpoint): a failed job's content is its stored record."""
    from omni_errors.render.jobs import stored_error_response

    @functools.wraps(original)
    async def download_video(video_id: str) -> Any:
        job = await module.VIDEO_STORE.get(video_id)
        if not _failed_job(module, job):
            return await original(video_id)
        return stored_error_response(job.error.model_dump())

    point_route(module.router, original, download_video)
    return download_video


def document_video_jobs(app: Any) -> None:
    """Make `app.openapi()` declare the retrieval's 200 (`VideoResponse`) and the record's fields in
    `VideoError`, where the app serves video jobs."""
    generate = app.openapi
    fields = RecordFields.model_json_schema()["properties"]

    def openapi() -> dict[str, Any]:
        document: dict[str, Any] = generate()
        schemas = document.get("components", {}).get("schemas", {})
        operation = document.get("paths", {}).get(_RETRIEVE[1], {}).get(_RETRIEVE[0])
        if operation is None or "VideoError" not in schemas or "VideoResponse" not in schemas:
            return document
        schemas["VideoError"]["properties"].update(fields)
        ok = operation["responses"].setdefault("200", {"description": "Successful Response"})
        ok["content"] = {"application/json": {"schema": {"$ref": "#/components/schemas/VideoResponse"}}}
        return document

    app.openapi = openapi
