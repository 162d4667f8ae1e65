"""`/health` of a pipeline that cannot serve: 503 with the record, and its state said in words.

The app is served over ASGI (no uvicorn) in a child process: the pipeline is real, its stages real
processes; stage 0 fails to start, so the supervisor is dead before the app answers anything. The
child keeps the app's Prometheus metrics out of this process's registry, where a second
instrumented app (the server tests') would find its metric names taken and record nothing.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import httpx
import pytest
from omni_errors_tools.lifecycle import LifecycleConfig, StageStartupError
from omni_errors_tools.pipeline.app import build_app
from omni_errors_tools.pipeline.schemas import Limits
from omni_errors_tools.pipeline.service import PipelineConfig, Service


def _health_of_a_dead_pipeline() -> tuple[int, dict[str, Any]]:
    async def run() -> httpx.Response:
        service = Service(PipelineConfig(fault="startup", fault_stage=0), LifecycleConfig(startup_timeout=120))
        with pytest.raises(StageStartupError):
            await service.supervisor.start()
        await service.supervisor.wait_dead()
        transport = httpx.ASGITransport(app=build_app(service, Limits()))
        async with httpx.AsyncClient(transport=transport, base_url="http://pipeline") as client:
            return await client.get("/health")

    response = asyncio.run(run())
    return response.status_code, response.json()


def test_a_dead_pipeline_says_dead() -> None:
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        status, body = pool.submit(_health_of_a_dead_pipeline).result(timeout=300)
    assert status == 503
    error = body["error"]
    assert (error["message"], error["code"], error["stage_id"]) == ("the pipeline is dead", 503, 0)
