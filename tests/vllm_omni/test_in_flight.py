"""`omni_errors.server.in_flight.InFlight`: the count the fatal stop waits on before its last call,
over a real Starlette app; and the answer of a request the stopping server cancels, over a real
uvicorn server."""

from __future__ import annotations

import asyncio
import socket

import httpx
import uvicorn
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.render.http import http_response
from omni_errors.semantics.core_table import DEAD_MESSAGE, fatal_record
from omni_errors.server.in_flight import InFlight
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


DEADLINE_S = 60.0


def test_a_request_the_stopping_server_cancels_after_a_fatal_failure_gets_the_fatal_record() -> None:
    """A request nothing will answer (it reached the engine as the pipeline ended) is cancelled by
    uvicorn's bounded graceful shutdown: its client gets the fatal record, not uvicorn's bare 500."""

    async def main() -> httpx.Response:
        async def never(request: Request) -> JSONResponse:
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

        app = Starlette(routes=[Route("/never", never, methods=["POST"])])
        app.add_middleware(InFlight)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        config = uvicorn.Config(app, lifespan="off", log_level="critical", timeout_graceful_shutdown=0.1)
        server = uvicorn.Server(config)
        serving = asyncio.ensure_future(server.serve(sockets=[listener]))
        try:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
                call = asyncio.ensure_future(client.post("/never", timeout=DEADLINE_S))

                async def in_flight() -> None:
                    while InFlight.count < 1:
                        await asyncio.sleep(0.01)

                await asyncio.wait_for(in_flight(), DEADLINE_S)
                fatal.declare(fatal_record(stage_id=0), ExitCode.FATAL_ENGINE)
                server.should_exit = True
                return await asyncio.wait_for(call, DEADLINE_S)
        finally:
            server.should_exit = True
            await asyncio.wait_for(serving, DEADLINE_S)
            listener.close()

    http_response(fatal_record(stage_id=0))  # vLLM's response models loaded, as in the API process
    try:
        response = asyncio.run(main())
    finally:
        fatal.reset()
    assert response.status_code == 500
    error = response.json()["error"]
    assert (error["message"], error["type"], error["stage_id"]) == (DEAD_MESSAGE, "InternalServerError", 0)
    assert InFlight.count == 0
