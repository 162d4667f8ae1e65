"""`/health` of a pipeline that cannot serve: 503 with the record, and its state said in words.

In process (the app over ASGI, no uvicorn): the pipeline is real, its stages real processes; stage
0 fails to start, so the supervisor is dead before the app answers anything.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest
from omni_errors.lifecycle import LifecycleConfig, StageStartupError
from omni_errors.pipeline.app import build_app
from omni_errors.pipeline.schemas import Limits
from omni_errors.pipeline.service import PipelineConfig, Service


def test_a_dead_pipeline_says_dead() -> None:
    async def run() -> httpx.Response:
        service = Service(PipelineConfig(fault="startup", fault_stage=0), LifecycleConfig(startup_timeout=120))
        with pytest.raises(StageStartupError):
            await service.supervisor.start()
        await service.supervisor.wait_dead()
        transport = httpx.ASGITransport(app=build_app(service, Limits()))
        async with httpx.AsyncClient(transport=transport, base_url="http://pipeline") as client:
            return await client.get("/health")

    response = asyncio.run(run())
    assert response.status_code == 503
    error = response.json()["error"]
    assert (error["message"], error["code"], error["stage_id"]) == ("the pipeline is dead", 503, 0)
