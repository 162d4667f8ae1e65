"""Every exception type on every transport, against a real uvicorn server over loopback."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import httpx
import pytest
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.render.jobs import stored_error_response
from omni_errors.render.websocket import CLIENT_CLOSE_CODE, SERVER_CLOSE_CODE
from prometheus_client.parser import text_string_to_metric_families
from semantics_app import CASES, FATAL_SEEN, NO_FALLBACK, SECRET, Case, Server
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

BODIES: list[str] = []  # every error body any client saw, checked for leaks at the end


def _expected(case: Case, request_id: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": case.message, "type": case.type, "param": case.param, "code": case.status}
    if request_id is not None:
        error["request_id"] = request_id
    if case.stage_id is not None:
        error["stage_id"] = case.stage_id
    return {"error": error}


@pytest.mark.parametrize("name", sorted(CASES))
def test_http(server: Server, name: str) -> None:
    case = CASES[name]
    response = httpx.get(f"{server.base}/http/{name}", headers={"x-request-id": f"req-{name}"}, timeout=10)
    BODIES.append(response.text)
    body = response.json()
    assert response.status_code == body["error"]["code"] == case.status
    assert body == _expected(case, f"req-{name}")


def test_every_503_says_when_to_retry(server: Server) -> None:
    retry = httpx.get(f"{server.base}/http/unavailable_retry", timeout=10)
    assert retry.status_code == 503 and retry.headers["Retry-After"] == "7"  # the failure's own
    for name in ("unavailable", "queue_overflow", *(["engine_faulted"] if "engine_faulted" in CASES else [])):
        plain = httpx.get(f"{server.base}/http/{name}", timeout=10)
        assert plain.status_code == 503 and plain.headers["Retry-After"] == str(RETRY_AFTER_S)
    not_503 = httpx.get(f"{server.base}/http/stage_timeout", timeout=10)
    assert not_503.status_code == 504 and "Retry-After" not in not_503.headers


def test_headers_survive_rendering(server: Server) -> None:
    auth = httpx.get(f"{server.base}/http/http_401", timeout=10)
    assert auth.status_code == 401 and auth.headers["WWW-Authenticate"] == 'Bearer realm="omni"'
    limited = httpx.get(f"{server.base}/http/http_429_headers", timeout=10)
    assert limited.headers["Retry-After"] == "30" and limited.headers["X-RateLimit-Remaining"] == "0"
    assert limited.headers["Content-Length"] == str(len(limited.content))  # the envelope's own framing
    assert limited.json()["error"]["code"] == 429
    # Starlette's own 405 carries the route's methods in `Allow` (RFC 9110), through our renderer.
    wrong = httpx.request("TRACE", f"{server.base}/http/not_found", timeout=10)
    assert wrong.status_code == wrong.json()["error"]["code"] == 405
    assert wrong.headers["Allow"] == "GET"


@pytest.mark.parametrize("name", sorted(CASES))
def test_sse(server: Server, name: str) -> None:
    case = CASES[name]
    with httpx.stream("GET", f"{server.base}/sse/{name}", headers={"x-request-id": "sse-1"}, timeout=10) as response:
        assert response.status_code == 200  # headers went out before the failure
        text = response.read().decode()
    BODIES.append(text)
    events = [chunk.removeprefix("data: ") for chunk in text.split("\n\n") if chunk]
    assert events[0] == '{"delta": "hi"}'
    assert events[-1] == "[DONE]"
    errors = [json.loads(e) for e in events[1:-1]]
    assert len(errors) == 1, "exactly one terminal error event"
    assert errors[0] == _expected(case, "sse-1")
    assert errors[0]["error"]["code"] == case.status


def _ws_exchange(url: str) -> tuple[list[dict[str, Any]], int | None, str | None]:
    messages: list[dict[str, Any]] = []
    with connect(url, open_timeout=10, additional_headers={"x-request-id": "ws-1"}) as ws:
        try:
            while True:
                raw = ws.recv(timeout=10)
                BODIES.append(str(raw))
                messages.append(json.loads(raw))
        except ConnectionClosed as closed:
            code = closed.rcvd.code if closed.rcvd else None
            reason = closed.rcvd.reason if closed.rcvd else None
    return messages, code, reason


@pytest.mark.parametrize("route", ["ws", "ws-handler"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_websocket(server: Server, name: str, route: str) -> None:
    case = CASES[name]
    messages, code, reason = _ws_exchange(f"{server.ws_base}/{route}/{name}")
    assert messages[0] == {"type": "delta", "text": "hi"}
    assert len(messages) == 2, "exactly one terminal error message"
    assert messages[1] == {"type": "error", **_expected(case, "ws-1")}
    assert code == (CLIENT_CLOSE_CODE if case.status < 500 else SERVER_CLOSE_CODE)
    assert reason == case.type


@pytest.mark.parametrize("name", sorted(NO_FALLBACK))
def test_raw_fallbacks_off(server: Server, name: str) -> None:
    case = NO_FALLBACK[name]
    response = httpx.get(f"{server.base}/nofallback/http/{name}", timeout=10)
    BODIES.append(response.text)
    assert response.status_code == response.json()["error"]["code"] == case.status
    assert response.json() == _expected(case)


def test_unknown_value_error_is_500_with_fallbacks_off(server: Server) -> None:
    response = httpx.get(f"{server.base}/nofallback/http/raw_value", timeout=10)
    assert response.status_code == 500
    assert response.json()["error"]["type"] == "InternalServerError"


def test_request_validation_and_unknown_route(server: Server) -> None:
    response = httpx.post(f"{server.base}/v1/body", json={"temperature": SECRET}, timeout=10)
    BODIES.append(response.text)
    error = response.json()["error"]
    assert response.status_code == error["code"] == 400
    assert error["type"] == "BadRequestError"
    assert error["param"] in ("model", "temperature")
    assert SECRET not in response.text
    response = httpx.get(f"{server.base}/no/such/route", timeout=10)
    assert response.status_code == response.json()["error"]["code"] == 404
    assert response.json()["error"]["type"] == "NotFoundError"


def _scrape(server: Server) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = httpx.get(f"{server.base}/metrics", timeout=10).text
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in ("http_requests_total", "omni_errors_total"):
                samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _delta(
    before: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    after: dict[tuple[str, tuple[tuple[str, str], ...]], float],
    metric: str,
    key: str,
    **match: str,
) -> Counter[str]:
    out: Counter[str] = Counter()
    for (name, labels), value in after.items():
        label_map = dict(labels)
        if name != metric or any(label_map.get(k) != v for k, v in match.items()):
            continue
        diff = value - before.get((name, labels), 0.0)
        if diff:
            out[label_map[key]] += int(diff)
    return out


def test_http_requests_total_counts_what_clients_saw(server: Server) -> None:
    before = _scrape(server)
    seen: Counter[str] = Counter()
    exact: Counter[str] = Counter()
    for name in sorted(CASES):
        response = httpx.get(f"{server.base}/http/{name}", timeout=10)
        seen[f"{response.status_code // 100}xx"] += 1
        exact[str(response.status_code)] += 1
    after = _scrape(server)
    recorded = _delta(before, after, "http_requests_total", "status", handler="/http/{name}", method="GET")
    assert recorded == seen
    assert recorded["4xx"] > 0 and recorded["5xx"] > 0
    assert _delta(before, after, "omni_errors_total", "status") == exact


def test_async_job_flow(server: Server) -> None:
    created = httpx.post(f"{server.base}/jobs", params={"fail": "stage_timeout"}, timeout=10)
    assert created.status_code == 200
    job_id = created.json()["id"]
    expected_error = {**_expected(CASES["stage_timeout"])["error"], "request_id": job_id}
    metadata = httpx.get(f"{server.base}/jobs/{job_id}", timeout=10)
    assert metadata.status_code == 200  # the metadata read succeeded; the failure is embedded
    assert metadata.json()["status"] == "failed"
    assert metadata.json()["error"] == expected_error
    content = httpx.get(f"{server.base}/jobs/{job_id}/content", timeout=10)
    assert content.status_code == 504  # the stored status, not a guessed one
    assert content.json() == {"error": expected_error}
    # A server that keeps the embedded object instead of the frame (vLLM-Omni's video jobs) answers the same.
    replayed = stored_error_response(metadata.json()["error"])
    assert (replayed.status_code, json.loads(bytes(replayed.body))) == (504, {"error": expected_error})
    BODIES.extend([metadata.text, content.text])

    client_job = httpx.post(f"{server.base}/jobs", params={"fail": "validation"}, timeout=10).json()
    content = httpx.get(f"{server.base}/jobs/{client_job['id']}/content", timeout=10)
    assert content.status_code == content.json()["error"]["code"] == 400
    assert content.json()["error"]["param"] == "temperature"
    replayed = stored_error_response(httpx.get(f"{server.base}/jobs/{client_job['id']}", timeout=10).json()["error"])
    assert (replayed.status_code, json.loads(bytes(replayed.body))) == (400, content.json())

    done = httpx.post(f"{server.base}/jobs", timeout=10).json()
    assert done["status"] == "completed" and done["error"] is None
    content = httpx.get(f"{server.base}/jobs/{done['id']}/content", timeout=10)
    assert content.status_code == 200 and content.content == b"\x00video-bytes"

    pending = httpx.post(f"{server.base}/jobs/pending", timeout=10).json()
    content = httpx.get(f"{server.base}/jobs/{pending['id']}/content", timeout=10)
    assert content.status_code == content.json()["error"]["code"] == 409
    missing = httpx.get(f"{server.base}/jobs/job-nope", timeout=10)
    assert missing.status_code == missing.json()["error"]["code"] == 404


def test_on_fatal_hook_gets_fatal_records_only(server: Server) -> None:
    FATAL_SEEN.clear()
    httpx.get(f"{server.base}/http/not_found", timeout=10)
    httpx.get(f"{server.base}/http/omni_dead", timeout=10)
    assert [(d.fatal, d.stage_id, d.status_code) for d in FATAL_SEEN] == [(True, 4, 500)]


def test_zz_no_leaks_in_any_body(server: Server) -> None:
    """Runs last in this module (name order is not guaranteed by pytest, so it also works on its own)."""
    BODIES.append(httpx.get(f"{server.base}/http/validation", timeout=10).text)
    BODIES.append(httpx.get(f"{server.base}/http/oom", timeout=10).text)
    for body in BODIES:
        assert SECRET not in body
        assert "Traceback" not in body and 'File "' not in body
        assert "/work/" not in body and "site-packages" not in body
        assert "Tried to allocate" not in body  # OOM internals stay in the server log
