"""The WebSocket safety net: Starlette's `ServerErrorMiddleware` answers only HTTP, so an exception
class without a handler would otherwise reach uvicorn, which closes with a bare 1011 and no message.

This ASGI middleware (added by `install`) catches what escapes a websocket route, then sends the
same terminal message and close code as `omni_errors.render.websocket`. It watches the ASGI
messages to know whether the socket was accepted or already closed. HTTP passes straight through.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from omni_errors._native import OmniErrorDetails
from omni_errors.semantics.reporting import FatalHook, report

__all__ = ["WebSocketSafetyNet"]

_log = logging.getLogger(__name__)


class WebSocketSafetyNet:
    """ASGI middleware rendering any exception escaping a websocket route."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        raw_fallbacks: bool = True,
        on_fatal: FatalHook | None = None,
    ) -> None:
        self.app = app
        self.raw_fallbacks = raw_fallbacks
        self.on_fatal = on_fatal

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        state = {"accepted": False, "closed": False}

        async def tracking_send(message: Message) -> None:
            if message["type"] == "websocket.accept":
                state["accepted"] = True
            elif message["type"] in ("websocket.close", "websocket.http.response.start"):
                state["closed"] = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception as exc:
            if state["closed"]:
                raise
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", [])}
            await report(
                exc,
                lambda details: _send_error(send, details, accepted=state["accepted"]),
                where=f"WEBSOCKET {scope.get('path')}",
                request_id=headers.get("x-request-id"),
                raw_fallbacks=self.raw_fallbacks,
                on_fatal=self.on_fatal,
            )


async def _send_error(send: Send, details: OmniErrorDetails, *, accepted: bool) -> None:
    """The terminal message and close frame as raw ASGI messages (accepting first if needed)."""
    from omni_errors.render.websocket import close_code, ws_message

    messages: list[dict[str, Any]] = [] if accepted else [{"type": "websocket.accept"}]
    messages.append({"type": "websocket.send", "text": json.dumps(ws_message(details))})
    messages.append({"type": "websocket.close", "code": close_code(details), "reason": details.error_type})
    try:
        for message in messages:
            await send(message)
    except Exception:  # omni-errors: ignore[OE202]: the client is gone; nothing left to tell it
        _log.info("client left before the error could be delivered")
