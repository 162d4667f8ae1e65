"""End to end against a real `serve` process: every transport, client errors, non-fatal faults."""

from __future__ import annotations

import base64
import json
import time
from typing import TYPE_CHECKING, Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletionMessageParam
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

if TYPE_CHECKING:
    from pipeline_server import Server

MODEL = "omni-tiny"
CHAT = "/v1/chat/completions"


def chat(**kw: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "hello"}], "max_tokens": 6}
    body.update(kw)
    return body


def sse_events(resp: httpx.Response) -> list[Any]:
    out: list[Any] = []
    for line in resp.iter_lines():
        if line.startswith("data: "):
            data = line[6:]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def test_health_and_models(server: Server) -> None:
    assert httpx.get(f"{server.base}/health").json() == {"status": "ok"}
    assert httpx.get(f"{server.base}/v1/models").json()["data"][0]["id"] == MODEL


def test_chat_non_stream_with_audio(server: Server) -> None:
    r = httpx.post(f"{server.base}{CHAT}", json=chat(modalities=["text", "audio"]), timeout=60)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["message"]["content"] and choice["finish_reason"] in ("stop", "length")
    assert base64.b64decode(choice["message"]["audio"]["data"])[:4] == b"RIFF"


def test_chat_stream_is_deterministic(server: Server) -> None:
    texts = []
    for _ in range(2):
        with httpx.stream("POST", f"{server.base}{CHAT}", json=chat(stream=True, seed=7), timeout=60) as r:
            assert r.status_code == 200
            events = sse_events(r)
        assert events[-1] == "[DONE]" and events[-2]["choices"][0]["finish_reason"] in ("stop", "length")
        texts.append("".join(e["choices"][0]["delta"].get("content", "") for e in events[:-1]))
    assert texts[0] and texts[0] == texts[1]


def test_speech_wav(server: Server) -> None:
    r = httpx.post(f"{server.base}/v1/audio/speech", json={"model": MODEL, "input": "hello there"}, timeout=60)
    assert r.status_code == 200 and r.headers["content-type"] == "audio/wav" and r.content[:4] == b"RIFF"


def test_jobs(server: Server) -> None:
    body = {"model": MODEL, "input": "a longer sentence for the job to speak", "id": "job-e2e"}
    r = httpx.post(f"{server.base}/v1/jobs", json=body)
    assert r.status_code == 200 and r.json()["status"] == "in_progress"
    again = httpx.post(f"{server.base}/v1/jobs", json=body)
    assert again.status_code == 409 and again.json()["error"]["type"] == "ConflictError"
    early = httpx.get(f"{server.base}/v1/jobs/job-e2e/content")
    assert early.status_code in (200, 409)
    for _ in range(200):
        if httpx.get(f"{server.base}/v1/jobs/job-e2e").json()["status"] == "completed":
            break
        time.sleep(0.1)
    content = httpx.get(f"{server.base}/v1/jobs/job-e2e/content")
    assert content.status_code == 200 and content.content[:4] == b"RIFF"
    assert httpx.get(f"{server.base}/v1/jobs/job-nope").status_code == 404


def test_websocket_ok_then_client_error(server: Server) -> None:
    with connect(f"{server.ws}/v1/chat/ws") as ws:
        ws.send(json.dumps(chat()))
        kinds = []
        while not kinds or kinds[-1] != "done":
            kinds.append(json.loads(ws.recv())["type"])
        assert "text.delta" in kinds
        ws.send(json.dumps(chat(max_tokens=0)))
        msg = json.loads(ws.recv())
        assert msg["type"] == "error" and msg["error"]["code"] == 400 and msg["error"]["param"] == "max_tokens"
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


WAV_BAD = [{"type": "input_audio", "input_audio": {"data": base64.b64encode(b"not a wav").decode(), "format": "wav"}}]
CLIENT_ERRORS = [
    ("model", CHAT, chat(model="nope"), 404, None),
    ("max_tokens", CHAT, chat(max_tokens=0), 400, "max_tokens"),
    ("temperature", CHAT, chat(temperature=3), 400, "temperature"),
    ("n", CHAT, chat(n=2), 400, "n"),
    ("modalities", CHAT, chat(modalities=["video"]), 400, "modalities"),
    ("schema", CHAT, {"model": MODEL, "messages": "hi"}, 400, "messages"),
    (
        "audio",
        CHAT,
        chat(messages=[{"role": "user", "content": WAV_BAD}]),
        422,
        "messages[0].content[0].input_audio.data",
    ),
    ("voice", "/v1/audio/speech", {"model": MODEL, "input": "hi", "voice": "x"}, 400, "voice"),
    ("format", "/v1/audio/speech", {"model": MODEL, "input": "hi", "response_format": "mp3"}, 400, "response_format"),
    ("fault", CHAT, chat(omni_fault={"kind": "validation"}), 400, "omni_fault"),
    ("fault_kind", CHAT, chat(omni_fault={"kind": "startup"}), 400, "omni_fault"),
]


@pytest.mark.parametrize(("name", "path", "body", "status", "param"), CLIENT_ERRORS, ids=[c[0] for c in CLIENT_ERRORS])
def test_client_errors(
    server: Server, name: str, path: str, body: dict[str, Any], status: int, param: str | None
) -> None:
    for stream in (False, True):
        r = httpx.post(f"{server.base}{path}", json={**body, "stream": stream}, timeout=30)
        assert r.status_code == status, r.text
        error = r.json()["error"]
        assert error["code"] == status and error["param"] == param


def test_unknown_voice_is_a_bad_request_to_the_openai_sdk(server: Server) -> None:
    """OpenAI's SDK raises `BadRequestError` naming `voice`, as for OpenAI's own API: the request's
    value is wrong, not its URL or model (`NotFoundError`)."""
    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key="unused", max_retries=0, timeout=30)
    with pytest.raises(openai.BadRequestError) as raised:
        client.audio.speech.create(model=MODEL, voice="alloy", input="hello there")
    assert (raised.value.status_code, raised.value.param, raised.value.type) == (400, "voice", "BadRequestError")
    assert "alloy" not in raised.value.message  # the rejected value is not echoed
    spoken = client.audio.speech.create(model=MODEL, voice="chelsie", input="hello there")
    assert spoken.content[:4] == b"RIFF"


def test_the_openai_sdk_reads_the_request_id_of_an_error(server: Server) -> None:
    """An error answered after its request was given an id names it in `x-request-id` as in the body;
    the SDK reads it into `error.request_id`, the id to quote in a report. A client's own id is kept;
    a request refused before it had an id answers with the client's id."""
    client = openai.OpenAI(base_url=f"{server.base}/v1", api_key="unused", max_retries=0, timeout=60)
    hi: list[ChatCompletionMessageParam] = [{"role": "user", "content": "hi"}]
    fault = {"X-Omni-Fault": "stage_error;stage=1"}
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model=MODEL, messages=hi, extra_headers=fault)
    given = raised.value.response.json()["error"]["request_id"]
    assert given.startswith("chatcmpl-") and raised.value.request_id == given
    with pytest.raises(openai.InternalServerError) as raised:
        client.chat.completions.create(model=MODEL, messages=hi, extra_headers={**fault, "x-request-id": "report-me-1"})
    assert raised.value.request_id == "report-me-1" == raised.value.response.json()["error"]["request_id"]
    with pytest.raises(openai.NotFoundError) as raised:
        client.chat.completions.create(model="nope", messages=hi, extra_headers={"x-request-id": "report-me-2"})
    assert raised.value.request_id == "report-me-2"


def test_nonfatal_stage_error_every_transport(server: Server) -> None:
    fault = {"X-Omni-Fault": "stage_error;stage=1"}
    r = httpx.post(f"{server.base}{CHAT}", json=chat(modalities=["text", "audio"]), headers=fault, timeout=60)
    assert r.status_code == 500 and r.json()["error"]["stage_id"] == 1
    fault0 = {"X-Omni-Fault": "stage_error;stage=0;after=2"}
    with httpx.stream("POST", f"{server.base}{CHAT}", json=chat(stream=True), headers=fault0, timeout=60) as s:
        assert s.status_code == 200
        events = sse_events(s)
    assert events[-1] == "[DONE]" and events[-2]["error"]["code"] == 500 and events[-2]["error"]["stage_id"] == 0
    assert sum(1 for e in events if isinstance(e, dict) and "error" in e) == 1
    with connect(f"{server.ws}/v1/chat/ws", additional_headers=fault0) as ws:
        ws.send(json.dumps(chat()))
        while (msg := json.loads(ws.recv()))["type"] != "error":
            pass
        assert msg["error"]["stage_id"] == 0
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1011
    job = {"model": MODEL, "input": "job", "id": "job-fails", "omni_fault": {"kind": "stage_error", "stage": 2}}
    assert httpx.post(f"{server.base}/v1/jobs", json=job).status_code == 200
    for _ in range(200):
        meta = httpx.get(f"{server.base}/v1/jobs/job-fails").json()
        if meta["status"] == "failed":
            break
        time.sleep(0.1)
    assert meta["error"]["code"] == 500 and meta["error"]["stage_id"] == 2
    content = httpx.get(f"{server.base}/v1/jobs/job-fails/content")
    assert content.status_code == 500 and content.json()["error"]["stage_id"] == 2
    assert httpx.get(f"{server.base}/health").status_code == 200  # non-fatal: the pipeline keeps serving


def test_metrics_count_errors(server: Server) -> None:
    httpx.post(f"{server.base}{CHAT}", json=chat(model="nope"))
    text = httpx.get(f"{server.base}/metrics").text
    assert 'omni_errors_total{category="client",error_type="NotFoundError"' in text
    assert 'status="4xx"' in text


def test_duplicate_request_id_is_a_conflict(server: Server) -> None:
    headers = {"x-request-id": "dup-1"}
    with httpx.stream("POST", f"{server.base}{CHAT}", json=chat(stream=True, max_tokens=200), headers=headers) as s:
        assert s.status_code == 200  # submitted before the headers went out: in flight now
        again = httpx.post(f"{server.base}{CHAT}", json=chat(), headers=headers, timeout=30)
        assert again.status_code == 409 and again.json()["error"]["type"] == "ConflictError"
