"""`BodyLimit` over a real uvicorn server: a body over the limit is answered 413 with the record,
whether the client said its size first (`Content-Length`) or not (chunked), and counted as 413."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
from prometheus_client.parser import text_string_to_metric_families
from semantics_app import BODY_LIMIT, Server

TOO_LARGE = {
    "message": f"the request body is larger than this server's limit of {BODY_LIMIT} bytes",
    "type": "RequestEntityTooLargeError",
    "param": None,
    "code": 413,
}


JSON = {"content-type": "application/json"}


def _body(size: int) -> bytes:
    """A valid JSON request body of exactly `size` bytes."""
    head, tail = b'{"model": "m", "pad": "', b'"}'
    return head + b"x" * (size - len(head) - len(tail)) + tail


def _chunks(body: bytes, size: int = 1000) -> Iterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start : start + size]


def _count_413(server: Server) -> float:
    text = httpx.get(f"{server.base}/metrics", timeout=10).text
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "http_requests_total" and s.labels.get("handler") == "/v1/body" and s.labels.get("status") == "4xx"
    )


def test_a_body_at_the_limit_is_read() -> None:
    assert len(_body(BODY_LIMIT)) == BODY_LIMIT


def test_the_limit_is_exact(server: Server) -> None:
    ok = httpx.post(f"{server.base}/v1/body", content=_body(BODY_LIMIT), headers=JSON, timeout=10)
    assert ok.status_code == 200 and ok.json() == {"model": "m"}
    over = httpx.post(f"{server.base}/v1/body", content=_body(BODY_LIMIT + 1), headers=JSON, timeout=10)
    assert over.status_code == 413 and over.json() == {"error": TOO_LARGE}


def test_a_chunked_body_is_stopped_at_the_limit(server: Server) -> None:
    request = httpx.Request("POST", f"{server.base}/v1/body", content=_chunks(_body(BODY_LIMIT + 500)), headers=JSON)
    assert "content-length" not in request.headers and request.headers["transfer-encoding"] == "chunked"
    with httpx.Client(timeout=10) as client:
        response = client.send(request)
    assert response.status_code == 413 and response.json() == {"error": TOO_LARGE}
    small = httpx.post(f"{server.base}/v1/body", content=_chunks(_body(BODY_LIMIT)), headers=JSON, timeout=10)
    assert small.status_code == 200


def test_the_413_is_counted_as_the_client_saw_it(server: Server) -> None:
    before = _count_413(server)
    httpx.post(f"{server.base}/v1/body", content=_body(BODY_LIMIT * 4), headers=JSON, timeout=10)
    with httpx.Client(timeout=10) as client:
        client.send(
            httpx.Request("POST", f"{server.base}/v1/body", content=_chunks(_body(BODY_LIMIT * 4)), headers=JSON)
        )
    assert _count_413(server) - before == 2
