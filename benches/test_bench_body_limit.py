"""`omni-errors serve --max-body-bytes`: a 50 MB chat body answered 413 before it is read, beside the
named baseline "no limit" (the same app without `BodyLimit`: it reads and parses the body to its
400, as main did and vLLM does), in the same run; and a small request through the limit
beside the same request without it ("nothing else is slowed").

The app is `build_app`'s over ASGI in this process (httpx's ASGITransport hands it the body in one
piece, as a server would once read); its pipeline is not started, which neither answer needs: the
413 comes before any route, the baseline's 400 from validation. Target (issue 24): the 413 in
under 50 ms. The machine is shared: read the minimum of the rounds; each result records the load.

Run: `pytest benches/test_bench_body_limit.py --benchmark-only`.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import httpx
import pytest
from omni_errors.server import BodyLimit
from omni_errors_tools.lifecycle import LifecycleConfig
from omni_errors_tools.pipeline.app import build_app
from omni_errors_tools.pipeline.defaults import DEFAULT_MAX_BODY_BYTES
from omni_errors_tools.pipeline.schemas import Limits
from omni_errors_tools.pipeline.service import PipelineConfig, Service

BIG = 50_000_000
HEADERS = {"content-type": "application/json"}


def _chat(content_bytes: int) -> bytes:
    head, tail = b'{"model": "omni-tiny", "messages": [{"role": "user", "content": "', b'"}]}'
    return head + b"x" * (content_bytes - len(head) - len(tail)) + tail


def _app(*, limited: bool) -> Any:
    app = build_app(Service(PipelineConfig(), LifecycleConfig()), Limits(max_body_bytes=DEFAULT_MAX_BODY_BYTES))
    if not limited:  # the baseline: main's app, without the middleware (the stack is built on first call)
        app.user_middleware = [m for m in app.user_middleware if m.cls is not BodyLimit]
    return app


LIMITED = _app(limited=True)
UNLIMITED = _app(limited=False)


def _post(app: Any, body: bytes) -> httpx.Response:
    async def run() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench") as client:
            return await client.post("/v1/chat/completions", content=body, headers=HEADERS)

    return asyncio.run(run())


def _note(benchmark: Any, group: str, response: httpx.Response) -> None:
    benchmark.group = group
    benchmark.extra_info.update(status=response.status_code, loadavg=os.getloadavg()[0])


@pytest.mark.parametrize("side", ["limit 16 MiB", "no limit (baseline)"])
def test_50_mb_body(benchmark: Any, side: str) -> None:
    app, status, rounds = (LIMITED, 413, 20) if side.startswith("limit") else (UNLIMITED, 400, 3)
    body = _chat(BIG)
    response = benchmark.pedantic(_post, args=(app, body), rounds=rounds, iterations=1)
    assert response.status_code == status
    _note(benchmark, "50 MB chat body", response)


@pytest.mark.parametrize("side", ["limit 16 MiB", "no limit (baseline)"])
def test_small_request(benchmark: Any, side: str) -> None:
    app = LIMITED if side.startswith("limit") else UNLIMITED
    body = _chat(1000).replace(b"omni-tiny", b"not-served")  # answered 404 by validation: no pipeline needed
    response = benchmark.pedantic(_post, args=(app, body), rounds=200, iterations=1)
    assert response.status_code == 404
    _note(benchmark, "1 kB chat body", response)
