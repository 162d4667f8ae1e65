"""`/health` of a pipeline that cannot serve: 503 with the record, and its state said in words, as
docs/tour.md shows it; each probe logs one line and no traceback (a probe every few seconds must not
fill the log with the failure's traceback, which the stage logged once).

The app is served over ASGI (no uvicorn) in a child process: the pipeline is real, its stages real
processes; stage 0 fails to start, so the supervisor is dead before the app answers anything. The
child keeps the app's Prometheus metrics out of this process's registry, where a second
instrumented app (the server tests') would find its metric names taken and record nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import multiprocessing
import re
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from omni_errors_tools.lifecycle import LifecycleConfig, StageStartupError
from omni_errors_tools.pipeline.app import build_app
from omni_errors_tools.pipeline.schemas import Limits
from omni_errors_tools.pipeline.service import PipelineConfig, Service

TOUR = Path(__file__).resolve().parents[2] / "docs" / "tour.md"
PROBES = 100


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _probes_of_a_dead_pipeline(stage: int) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[str, bool]]]:
    """`PROBES` answers of /health once stage `stage` failed to start, and what the probes logged
    (each line's text and whether it has a traceback)."""

    async def run() -> list[httpx.Response]:
        service = Service(PipelineConfig(fault="startup", fault_stage=stage), LifecycleConfig(startup_timeout=120))
        with pytest.raises(StageStartupError):
            await service.supervisor.start()
        await service.supervisor.wait_dead()
        transport = httpx.ASGITransport(app=build_app(service, Limits()))
        lines = _Lines()
        logging.getLogger().addHandler(lines)
        async with httpx.AsyncClient(transport=transport, base_url="http://pipeline") as client:
            answers = [await client.get("/health") for _ in range(PROBES)]
        logging.getLogger().removeHandler(lines)
        logged.extend((r.getMessage(), r.exc_info is not None) for r in lines.records)
        return answers

    logged: list[tuple[str, bool]] = []
    return [(r.status_code, r.json()) for r in asyncio.run(run())], logged


def _tour_health_after_the_fatal_failure() -> dict[str, Any]:
    """The body docs/tour.md shows for /health after its fatal failure."""
    shown = re.search(
        r"Until the listener closes, `/health` says so:\n\n```console\n\$ curl .*?/health\n(.*?)\n```", TOUR.read_text()
    )
    assert shown is not None, "docs/tour.md no longer shows /health of the dead pipeline"
    body: dict[str, Any] = json.loads(shown.group(1))
    return body


# A deadline, not a speed bound: a spawned process imports the app, minutes beside CI's other suites.
@pytest.mark.timeout(900)
def test_a_dead_pipeline_says_dead_and_each_probe_logs_one_line() -> None:
    shown = _tour_health_after_the_fatal_failure()
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        answers, logged = pool.submit(_probes_of_a_dead_pipeline, shown["error"]["stage_id"]).result(timeout=600)
    assert answers == [(503, shown)] * PROBES
    assert len(logged) == PROBES, logged[:3]
    assert not any(traceback for _, traceback in logged)
    assert {text for text, _ in logged} == {
        "GET /health -> 503 ServiceUnavailableError (stage 2); logged where the record was made"
    }
