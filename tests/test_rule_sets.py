"""Which rule set cleaned a frame's text, and what a reader does about it.

Peers of different versions exchange frames; a reader runs its own sanitizer again only on text
that another rule set (older, newer, or none recorded) cleaned. A frame that falsely claims this
build's rule set is trusted on decode, so the client boundary (the renderers) must still strip it:
that is checked here through the real HTTP, SSE and WebSocket renderers over Starlette.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import omni_errors as oe
import pytest
from reference_decoder import encode as reference_encode

LEAKY = "cannot open /home/alice/.cache/weights.bin: api_key=sk-live-0123456789abcdefghijklmnop"
LEAKS = ["/home/alice", "sk-live-0123456789", "hunter2", "10.1.2.3"]


def _frame(
    rule_set: int, *, message: str = LEAKY, parameter: str | None = None, request_id: str | None = None
) -> bytes:
    record: dict[str, Any] = {
        "message": message,
        "error_type": "InternalServerError",
        "category": "server",
        "status_code": 500,
        "parameter": parameter,
        "request_id": request_id,
    }
    return reference_encode(record, rule_set=rule_set)


@pytest.mark.parametrize(
    ("peer", "rule_set"),
    [("1.0 writer", 0), ("older rules", oe.RULE_SET - 1), ("newer rules", oe.RULE_SET + 1), ("foreign", 0xFFFF)],
)
def test_text_from_other_rule_sets_is_sanitized_again(peer: str, rule_set: int) -> None:
    record = oe.decode(_frame(rule_set, parameter="body./etc/passwd"))
    assert record.message == oe.sanitize(LEAKY), peer
    assert record.parameter is not None and "/etc/passwd" not in record.parameter
    assert record.rule_set == oe.RULE_SET
    # Re-encoded, the frame now says truthfully that this build's rules cleaned it.
    assert oe.peek(oe.encode(record)).rule_set == oe.RULE_SET


def test_text_from_this_rule_set_is_trusted_unless_asked() -> None:
    frame = _frame(oe.RULE_SET)
    assert oe.decode(frame).message == LEAKY
    assert oe.decode(frame, sanitize=True).message == oe.sanitize(LEAKY)
    assert oe.decode_many(frame * 2, sanitize=True)[1].message == oe.sanitize(LEAKY)


def test_a_record_kept_unsanitized_never_claims_to_be_clean() -> None:
    """A relay that decodes with sanitize=False forwards the old claim, not a new one."""
    relayed = oe.decode(_frame(1), sanitize=False)
    assert relayed.message == LEAKY and relayed.rule_set == 1
    forwarded = oe.encode(relayed)
    assert oe.peek(forwarded).rule_set == 1
    assert oe.decode(forwarded).message == oe.sanitize(LEAKY)


def test_a_batch_from_mixed_peers() -> None:
    batch = b"".join(_frame(r, request_id=f"req-{r}") for r in (0, 1, oe.RULE_SET, oe.RULE_SET + 1))
    records = oe.decode_many(batch)
    assert [r.request_id for r in records] == ["req-0", "req-1", f"req-{oe.RULE_SET}", f"req-{oe.RULE_SET + 1}"]
    assert [r.message == LEAKY for r in records] == [False, False, True, False]
    assert [r.rule_set for r in records] == [oe.RULE_SET] * 4


# --- a forged frame through the real renderers ----------------------------------------------

FORGED = _frame(
    oe.RULE_SET,
    message="db at 10.1.2.3 rejected password=hunter2 for /home/alice/app.py; " + LEAKY,
    parameter="/home/alice/secret.json",
    request_id="req password=hunter2",
)


@pytest.fixture(scope="module")
def client() -> Any:
    from omni_errors.render.http import http_response
    from omni_errors.render.sse import sse_terminal
    from omni_errors.render.websocket import send_error
    from starlette.applications import Starlette
    from starlette.responses import StreamingResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.testclient import TestClient

    async def http(request: Any) -> Any:
        return http_response(oe.decode(FORGED))

    async def sse(request: Any) -> Any:
        async def events() -> Any:
            yield 'data: {"delta": "partial"}\n\n'
            yield sse_terminal(oe.decode(FORGED))

        return StreamingResponse(events(), media_type="text/event-stream")

    async def ws(websocket: Any) -> None:
        await websocket.accept()
        await send_error(websocket, oe.decode(FORGED))

    app = Starlette(routes=[Route("/http", http), Route("/sse", sse), WebSocketRoute("/ws", ws)])
    with TestClient(app) as c:
        yield c


def _assert_stripped(text: str) -> None:
    for leak in [*LEAKS, "/home/alice/secret.json"]:
        assert leak not in text, (leak, text)
    assert "rejected" in text


def test_the_forged_frame_is_trusted_on_decode() -> None:
    record = oe.decode(FORGED)
    assert "hunter2" in record.message and record.parameter == "/home/alice/secret.json"


def test_forged_frame_over_http_is_stripped(client: Any) -> None:
    response = client.get("/http")
    assert response.status_code == 500
    _assert_stripped(response.text)
    assert json.loads(response.text)["error"]["param"] == "<path>"


def test_forged_frame_over_sse_is_stripped(client: Any) -> None:
    with client.stream("GET", "/sse") as response:
        body = "".join(response.iter_text())
    events = [e for e in body.split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    _assert_stripped(events[-2])


def test_forged_frame_over_websocket_is_stripped(client: Any) -> None:
    from starlette.websockets import WebSocketDisconnect

    with client.websocket_connect("/ws") as ws:
        message = ws.receive_json()
        with pytest.raises(WebSocketDisconnect) as closed:
            ws.receive_json()
    assert message["type"] == "error" and closed.value.code == 1011
    _assert_stripped(json.dumps(message))


_CORPORA = [Path(__file__).parent / "sanitize_cases.jsonl", Path(__file__).parent / "sanitizer" / "realistic.jsonl"]
#: (RULE_SET, digest of what `sanitize` makes of every corpus input) as last recorded. RULE_SET tells
#: readers whether text needs cleaning again, so it must change whenever the rules' output does.
RECORDED_RULES = (2, "f7e70c3fbeb6aa62")


def _rules_digest() -> str:
    digest = hashlib.sha256()
    for corpus in _CORPORA:
        for line in corpus.read_text().splitlines():
            text = json.loads(line)["input"]
            digest.update(oe.sanitize(text).encode() + b"\0" + oe.sanitize(text, max_len=64).encode() + b"\0")
    return digest.hexdigest()[:16]


def test_rule_set_is_bumped_with_the_rules() -> None:
    assert (oe.RULE_SET, _rules_digest()) == RECORDED_RULES, (
        "what the sanitizer makes of the corpora changed: bump RULE_SET in rust/src/sanitize/mod.rs and "
        "record the new (RULE_SET, digest) pair in RECORDED_RULES"
    )
