"""`InFlight`: the HTTP requests a server has not finished answering, which a fatal stop waits on."""

from __future__ import annotations

import asyncio
from typing import Any

from omni_errors.fatal import process as fatal

__all__ = ["InFlight"]

_DRAIN_POLL_S = 0.01


class InFlight:
    """An ASGI middleware that counts the HTTP requests the server has not finished answering, and
    answers one the stopping server cancels after a fatal failure with the fatal record.

    Such a request reached the engine as the pipeline ended, after its requests had been answered
    (a loaded machine widens that window): nothing will ever answer it, and once the stop's
    deadline has passed uvicorn cancels it, which would leave the client a bare 500.
    """

    count = 0  # one API server per process: the count is the process's

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_noting_start(message: Any) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        InFlight.count += 1
        try:
            await self.app(scope, receive, send_noting_start)
        except asyncio.CancelledError:
            record = fatal.declared()
            if started or record is None:
                raise
            from omni_errors.render.http import http_response
            from omni_errors.semantics.reporting import report

            response = report(record, http_response, where=f"{scope['method']} {scope['path']}")
            await response(scope, receive, send)
        finally:
            InFlight.count -= 1

    @classmethod
    async def drained(cls, deadline: float) -> bool:
        """Wait until no request is in flight, or until the loop time `deadline`; True if none is."""
        loop = asyncio.get_running_loop()
        while cls.count > 0 and loop.time() < deadline:
            await asyncio.sleep(_DRAIN_POLL_S)
        return cls.count == 0
