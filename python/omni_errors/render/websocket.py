"""WebSocket: one terminal JSON message with the nested `error` object, then a close code.

Close codes (RFC 6455, section 7.4.1) say whose fault it was; the exact status is in the message:

| fault | close code | meaning |
|---|---|---|
| client (`category == "client"`) | 1008 | Policy Violation: the request was rejected |
| server (`category == "server"`, fatal or not) | 1011 | Internal Error: the server could not complete it |

The close reason is the record's `error_type` (an ASCII identifier, well under the 123-byte limit).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from omni_errors._native import OmniErrorDetails
from omni_errors.render import error_body
from omni_errors.semantics.reporting import report

__all__ = ["CLIENT_CLOSE_CODE", "SERVER_CLOSE_CODE", "close_code", "send_error", "websocket_errors", "ws_message"]

CLIENT_CLOSE_CODE = 1008
SERVER_CLOSE_CODE = 1011

_log = logging.getLogger(__name__)


def close_code(details: OmniErrorDetails) -> int:
    """1008 for a client fault, 1011 for a server fault, by `category`."""
    return CLIENT_CLOSE_CODE if details.category == "client" else SERVER_CLOSE_CODE


def ws_message(details: OmniErrorDetails) -> dict[str, Any]:
    """The terminal message: `{"type": "error", "error": {...}}`."""
    return {"type": "error", **error_body(details)}


async def send_error(websocket: WebSocket, details: OmniErrorDetails) -> None:
    """Send the terminal message and close with `close_code(details)`; accepts the socket first if needed."""
    if websocket.application_state == WebSocketState.DISCONNECTED:
        return
    if websocket.application_state == WebSocketState.CONNECTING:
        await websocket.accept()
    try:
        await websocket.send_json(ws_message(details))
        await websocket.close(code=close_code(details), reason=details.error_type)
    except (WebSocketDisconnect, RuntimeError):
        _log.info("client left before the error could be delivered")


@asynccontextmanager
async def websocket_errors(
    websocket: WebSocket,
    *,
    request_id: str | None = None,
    stage_id: int | None = None,
    raw_fallbacks: bool = True,
) -> AsyncIterator[None]:
    """Report any exception escaping the block as the terminal message and close; a disconnect is not an error."""
    try:
        yield
    except WebSocketDisconnect:
        return
    except Exception as exc:  # omni-errors: ignore[OE202]: the error frame and close code are the answer
        await report(
            exc,
            partial(send_error, websocket),
            where=f"websocket {websocket.url.path}",
            request_id=request_id,
            stage_id=stage_id,
            raw_fallbacks=raw_fallbacks,
        )
