"""A small asyncio HTTP/1.1 + SSE + WebSocket client for the chaos harness.

Raw sockets rather than httpx: a thousand concurrent streams on two shared cores leave little CPU
for a client library, and the harness must see exactly how each response ended (a terminal event,
`[DONE]`, a close code, or a dropped connection).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Outcome", "http_call", "sse_call", "ws_call"]


@dataclass
class Outcome:
    """How one request ended. `result`: ok | error | lost | hung."""

    kind: str
    result: str = "hung"
    status: int = 0  # HTTP status, or the in-stream error's code
    error_type: str | None = None
    param: str | None = None
    stage_id: int | None = None
    message: str = ""
    events: int = 0
    close_code: int | None = None
    t_headers: float | None = None
    t_done: float | None = None
    raw: str = field(default="", repr=False)  # every error text the client saw, for the leak check

    def fail(self, error: dict[str, Any], status: int) -> None:
        self.result = "error"
        self.status = int(error.get("code", status))
        self.error_type = error.get("type")
        self.param = error.get("param")
        self.stage_id = error.get("stage_id")
        self.message = str(error.get("message", ""))


async def _open(
    host: str, port: int, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str]
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int, dict[str, str]]:
    reader, writer = await asyncio.open_connection(host, port, limit=1 << 22)
    try:
        return reader, writer, *await _request(reader, writer, host, port, method, path, body, headers)
    except BaseException:
        writer.close()
        raise


async def _request(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    host: str,
    port: int,
    method: str,
    path: str,
    body: dict[str, Any] | None,
    headers: dict[str, str],
) -> tuple[int, dict[str, str]]:
    data = json.dumps(body).encode() if body is not None else b""
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close", f"Content-Length: {len(data)}"]
    if body is not None:
        head.append("Content-Type: application/json")
    head += [f"{k}: {v}" for k, v in headers.items()]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + data)
    line = await reader.readline()
    if not line:
        raise ConnectionResetError("no status line")
    status = int(line.split()[1])
    got: dict[str, str] = {}
    while (line := await reader.readline()) not in (b"\r\n", b""):
        key, _, value = line.decode("latin-1").partition(":")
        got[key.strip().lower()] = value.strip()
    return status, got


async def _chunks(reader: asyncio.StreamReader, headers: dict[str, str]) -> AsyncIterator[bytes]:
    if headers.get("transfer-encoding") == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0] or b"0", 16)
            if size == 0:
                return
            data = await reader.readexactly(size + 2)
            yield data[:-2]
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        yield await reader.read()


def _error_of(body: bytes) -> dict[str, Any]:
    try:
        error = json.loads(body).get("error")
    except (ValueError, AttributeError):
        return {"message": body[:200].decode("utf-8", "replace"), "type": None}
    return error if isinstance(error, dict) else {"message": str(error)}


async def http_call(
    host: str,
    port: int,
    method: str,
    path: str,
    body: dict[str, Any] | None = None,
    *,
    kind: str = "http",
    headers: dict[str, str] | None = None,
    t0: float = 0.0,
) -> Outcome:
    out = Outcome(kind)
    writer = None
    try:
        reader, writer, status, hdrs = await _open(host, port, method, path, body, headers or {})
        out.t_headers = time.monotonic() - t0
        data = b"".join([c async for c in _chunks(reader, hdrs)])
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
        out.result, out.message = "lost", type(exc).__name__
        out.t_done = time.monotonic() - t0
        return out
    finally:
        if writer is not None:
            writer.close()
    out.t_done = time.monotonic() - t0
    out.status = status
    if status >= 400:
        out.raw = data.decode("utf-8", "replace")
        out.fail(_error_of(data), status)
    else:
        out.result = "ok"
        out.raw = (
            data[:2000].decode("utf-8", "replace")
            if hdrs.get("content-type", "").startswith("application/json")
            else ""
        )
    return out


async def sse_call(
    host: str, port: int, path: str, body: dict[str, Any], *, headers: dict[str, str] | None = None, t0: float = 0.0
) -> Outcome:
    out = Outcome("sse")
    writer = None
    try:
        reader, writer, status, hdrs = await _open(host, port, "POST", path, body, headers or {})
        out.t_headers = time.monotonic() - t0
        out.status = status
        if status != 200:
            data = b"".join([c async for c in _chunks(reader, hdrs)])
            out.raw = data.decode("utf-8", "replace")
            out.fail(_error_of(data), status)
            out.t_done = time.monotonic() - t0
            return out
        buf = b""
        async for chunk in _chunks(reader, hdrs):
            buf += chunk
            *events, buf = buf.split(b"\n\n")
            for event in events:
                payload = event.removeprefix(b"data: ")
                if payload == b"[DONE]":
                    out.result = "ok" if out.result != "error" else "error"
                    out.t_done = time.monotonic() - t0
                    continue
                out.events += 1
                if b'"error"' in payload[:12]:
                    out.raw += payload.decode("utf-8", "replace")
                    out.fail(json.loads(payload)["error"], status)
    except (OSError, asyncio.IncompleteReadError, ValueError, IndexError) as exc:
        out.message = type(exc).__name__
    finally:
        if writer is not None:
            writer.close()
    if out.t_done is None:  # the stream ended without [DONE]: the request was dropped
        out.result = "lost"
        out.t_done = time.monotonic() - t0
    return out


async def ws_call(
    host: str,
    port: int,
    path: str,
    body: dict[str, Any] | str,
    *,
    headers: dict[str, str] | None = None,
    t0: float = 0.0,
) -> Outcome:
    import websockets

    out = Outcome("ws")
    try:
        async with websockets.connect(f"ws://{host}:{port}{path}", additional_headers=headers or {}) as ws:
            out.t_headers = time.monotonic() - t0
            await ws.send(body if isinstance(body, str) else json.dumps(body))
            async for message in ws:
                msg = json.loads(message)
                out.events += 1
                if msg.get("type") == "done":
                    out.result, out.status = "ok", 200
                    break
                if msg.get("type") == "error":
                    out.raw += str(message)
                    out.fail(msg["error"], 0)
            if out.result == "error":
                await ws.wait_closed()
            out.close_code = ws.close_code
    except websockets.ConnectionClosed as exc:
        out.close_code = exc.rcvd.code if exc.rcvd is not None else None
    except (OSError, ValueError) as exc:
        out.message = type(exc).__name__
    if out.result == "hung":
        out.result = "lost"
    out.t_done = time.monotonic() - t0
    return out
