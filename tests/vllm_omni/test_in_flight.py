"""`api.InFlight`: the count the fatal stop waits on before its last call, over a real Starlette app."""

from __future__ import annotations

import asyncio

import httpx
from omni_errors.vllm_omni.api import InFlight
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


def test_a_request_counts_until_its_answer_is_written() -> None:
    async def main() -> None:
        release = asyncio.Event()

        async def slow(request: Request) -> JSONResponse:
            await release.wait()
            return JSONResponse({"error": {"code": 500}}, status_code=500)

        app = Starlette(routes=[Route("/slow", slow)])
        app.add_middleware(InFlight)
        loop = asyncio.get_running_loop()
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://x") as client:
            calls = [asyncio.ensure_future(client.get("/slow")) for _ in range(8)]

            async def all_in() -> None:
                while InFlight.count < 8:
                    await asyncio.sleep(0.01)

            await asyncio.wait_for(all_in(), 30.0)
            assert not await InFlight.drained(loop.time() + 0.05)  # held: the deadline ends the wait
            release.set()
            assert await InFlight.drained(loop.time() + 30.0)
            assert [r.status_code for r in await asyncio.gather(*calls)] == [500] * 8
        assert InFlight.count == 0

    asyncio.run(main())
