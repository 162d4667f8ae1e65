"""The plugin enabled, inline stage: the whole HTTP surface, in every engine state (issue 24).

One server for the module, started with vLLM's development routes (`VLLM_SERVER_DEV_MODE=1`: the
`/pause` and `/resume` an RL trainer drives); the tests run in file order. The sleep tests use the
fake worker's real ack shape (`omni_errors_fake_diffusion`); `control-fault` beside its marker
makes a worker's sleep or wake-up ack an error. Schemathesis runs after them, on the awake server;
the level-2 sleep, which nothing undoes, is last.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from http_contract import error_body_is_the_record
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from hypothesis.stateful import run_state_machine_as_test
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.server.openapi import ERROR_SCHEMAS
from omni_errors.server.vllm_api import API_ERROR_STATUSES
from omni_errors.settings import MAX_BODY_BYTES
from omni_server import MODEL, OmniServer, error_of, serve
from schemathesis.baseline import Baseline, BaselineEntry, failure_identity
from schemathesis.checks import CHECKS, is_check_class
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.generation import GenerationMode

CONTROL_FAULT = "control-fault"  # omni_errors_fake_diffusion.faults.CONTROL_FAULT_FILE
BASELINE = Path(__file__).with_name("schemathesis-baseline.json")
#: Set, the Schemathesis test adds the failures it finds to the baseline (without a reason: add one).
UPDATE_ENV = "OMNI_ERRORS_SCHEMATHESIS_UPDATE"
TIMEOUT = 30.0  # every request's deadline: an unanswered request fails the test, it never hangs it
BODY_LIMIT = 1 << 20  # the server's `OMNI_ERRORS_MAX_BODY_BYTES`: above any body Schemathesis makes


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OmniServer]:
    env = {"VLLM_SERVER_DEV_MODE": "1", MAX_BODY_BYTES.name: str(BODY_LIMIT)}
    yield from serve(tmp_path_factory, plugin=True, subprocess_stage=False, env=env)


def post(server: OmniServer, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    return httpx.post(f"{server.url}{path}", json=body, timeout=TIMEOUT)


def sleep(server: OmniServer, level: int = 1) -> httpx.Response:
    return post(server, "/v1/omni/sleep", {"stage_ids": [0], "level": level})


def wake(server: OmniServer) -> httpx.Response:
    return post(server, "/v1/omni/wakeup", {"stage_ids": [0]})


def with_failed_ack(server: OmniServer, call: str, send: Callable[[OmniServer], httpx.Response]) -> httpx.Response:
    """`send(server)` while the worker's `call` ("sleep" or "wake") acks an error."""
    path = server.workdir / CONTROL_FAULT
    path.write_text(call, encoding="utf-8")
    try:
        return send(server)
    finally:
        path.unlink(missing_ok=True)


def assert_refused(response: httpx.Response, state: str, *hints: str) -> None:
    """503 `ServiceUnavailableError` for stage 0, saying `state` and how to leave it, with Retry-After."""
    assert response.status_code == 503, response.text
    error = error_of(response)
    assert (error["code"], error["type"], error["stage_id"]) == (503, "ServiceUnavailableError", 0)
    for hint in (state, *hints):
        assert hint in error["message"], error["message"]
    assert response.headers["Retry-After"] == str(RETRY_AFTER_S)


def health(server: OmniServer) -> dict[str, Any]:
    response = server.get("/health")
    assert response.status_code == 200, response.text  # alive: 503 is for a dead engine, as in vLLM
    body = response.json()
    assert isinstance(body, dict)
    return body


def test_a_request_to_a_sleeping_stage_is_answered_503_and_served_after_wake_up(server: OmniServer) -> None:
    assert server.images("a cat", timeout=TIMEOUT).status_code == 200
    slept = sleep(server)
    assert slept.status_code == 200, slept.text
    assert [ack["status"] for ack in slept.json()["acks"]] == ["SUCCESS"]
    assert_refused(server.images("a cat", timeout=TIMEOUT), "asleep", "POST /v1/omni/wakeup")
    assert_refused(server.chat("a cat", timeout=TIMEOUT), "asleep")
    body = health(server)
    assert (body["status"], body["is_sleeping"], body["stage_id"]) == ("sleeping", True, 0)
    assert wake(server).status_code == 200
    assert server.images("a cat", timeout=TIMEOUT).status_code == 200
    assert health(server) == {"status": "healthy"}


def test_the_rl_order_pause_sleep_wake_resume(server: OmniServer) -> None:
    """A trainer pauses, sleeps the stage, trains, wakes it, resumes: each step answers, then 200."""
    assert post(server, "/pause").json() == {"status": "paused"}
    assert_refused(server.images("a cat", timeout=TIMEOUT), "paused", "resume_generation")
    assert (health(server)["status"], health(server)["is_paused"]) == ("paused", True)
    assert sleep(server).status_code == 200
    assert_refused(server.images("a cat", timeout=TIMEOUT), "asleep", "POST /v1/omni/wakeup", "resume")
    assert wake(server).status_code == 200
    assert_refused(server.images("a cat", timeout=TIMEOUT), "paused")  # admission waits for the resume
    assert post(server, "/resume").json() == {"status": "resumed"}
    assert server.images("a cat", timeout=TIMEOUT).status_code == 200
    assert health(server) == {"status": "healthy"}


def test_a_sleep_whose_ack_reports_a_failure_answers_the_stage_and_changes_nothing(server: OmniServer) -> None:
    response = with_failed_ack(server, "sleep", sleep)
    assert response.status_code == 500, response.text
    error = error_of(response)
    assert (error["type"], error["stage_id"]) == ("InternalServerError", 0)
    assert "Stage 0" in error["message"] and "nothing was changed" in error["message"]
    assert server.images("a cat", timeout=TIMEOUT).status_code == 200
    assert health(server) == {"status": "healthy"}
    assert wake(server).json()["status"] == "SKIPPED"  # the route did not record the stage as asleep


def test_a_wake_up_whose_ack_reports_a_failure_leaves_the_stage_asleep(server: OmniServer) -> None:
    assert sleep(server).status_code == 200
    response = with_failed_ack(server, "wake", wake)
    assert response.status_code == 500, response.text
    assert error_of(response)["stage_id"] == 0
    assert_refused(server.images("a cat", timeout=TIMEOUT), "asleep")
    assert wake(server).status_code == 200
    assert server.images("a cat", timeout=TIMEOUT).status_code == 200


@pytest.mark.parametrize("stage_ids", [[], [7]], ids=["no-stage", "unknown-stage"])
def test_a_sleep_that_puts_no_stage_to_sleep_leaves_admission_open(server: OmniServer, stage_ids: list[int]) -> None:
    """vLLM-Omni closes admission before it looks at the stages: without the plugin, for ever."""
    response = post(server, "/v1/omni/sleep", {"stage_ids": stage_ids, "level": 1})
    assert response.status_code in (200, 400), response.text
    assert server.images("a cat", timeout=TIMEOUT).status_code == 200


UNBUILT = [
    ("POST", "/v1/completions", {"model": MODEL, "prompt": "a cat"}),
    ("POST", "/tokenize", {"model": MODEL, "prompt": "a cat"}),
    ("POST", "/detokenize", {"model": MODEL, "tokens": [1, 2]}),
    ("POST", "/v1/messages", {"model": MODEL, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]}),
    ("POST", "/v1/messages/count_tokens", {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}),
    ("GET", "/v1/responses/{response_id}", None),
    ("POST", "/v1/responses/{response_id}/cancel", None),
]


@pytest.mark.parametrize(("method", "route", "body"), UNBUILT, ids=[f"{m} {r}" for m, r, _ in UNBUILT])
def test_a_route_this_deployment_does_not_serve_says_so_as_vllm_does(
    server: OmniServer, method: str, route: str, body: dict[str, Any] | None
) -> None:
    """vLLM 0.33 answers a model without the API with 501 `NotImplementedError`; never a 500 quoting
    an attribute of the app's state."""
    path = route.replace("{response_id}", "resp_1")
    response = httpx.request(method, f"{server.url}{path}", json=body, timeout=TIMEOUT)
    assert response.status_code == 501, response.text
    error = error_of(response)
    assert (error["code"], error["type"]) == (501, "NotImplementedError")
    assert f"{method} {route}" in error["message"]
    assert "attribute" not in response.text


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("DELETE", "/health", "GET"),
        ("GET", "/v1/omni/sleep", "POST"),
        ("OPTIONS", "/ping", "GET, POST"),
        ("OPTIONS", "/v1/videos/sync", "POST"),
    ],
)
def test_a_405_allows_every_method_of_its_path(server: OmniServer, method: str, path: str, allowed: str) -> None:
    """RFC 9110: `Allow` on every 405, naming every method the path asked for serves (vLLM registers
    `GET /ping` and `POST /ping` as two routes; Starlette's own header names only the first), and
    only its own: `/v1/videos/{video_id}`'s `GET` and `DELETE` also match `/v1/videos/sync`."""
    response = httpx.request(method, f"{server.url}{path}", timeout=TIMEOUT)
    assert response.status_code == 405
    assert error_of(response)["type"] == "MethodNotAllowedError"
    assert response.headers["Allow"] == allowed


def test_a_client_error_a_route_wraps_in_a_500_keeps_its_status_and_parameter(server: OmniServer) -> None:
    """The batch chat route wraps whatever its handler raises in `HTTPException(500, str(exc))`; vLLM's
    `VLLMValidationError` for `top_logprobs` without `logprobs` is the client's, naming the parameter
    (found by Schemathesis as a 500)."""
    body = {"model": MODEL, "messages": [[{"role": "user", "content": "a cat"}]], "top_logprobs": 2}
    response = post(server, "/v1/chat/completions/batch", body)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert (error["code"], error["type"], error["param"]) == (400, "BadRequestError", "top_logprobs")
    assert "(parameter=" not in error["message"], "vLLM's str() of the error, not its message"


def test_a_model_the_server_does_not_serve_is_vllms_404_on_every_route(server: OmniServer) -> None:
    """vLLM's `_check_model` (the audio routes') on vLLM-Omni's diffusion models object: a 404 naming
    the model, not a 500 quoting the private `_Unsupported` (found by Schemathesis)."""
    response = post(server, "/v1/audio/generate", {"model": "not-served", "input": "rain"})
    assert response.status_code == 404, response.text
    error = error_of(response)
    assert (error["code"], error["type"], error["param"]) == (404, "NotFoundError", "model")
    assert "not-served" in error["message"] and "_Unsupported" not in response.text


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_the_limit_is_413_with_the_record_before_it_is_read(server: OmniServer, chunked: bool) -> None:
    """`OMNI_ERRORS_MAX_BODY_BYTES`: whether the client says the size first or not (chunked), the
    record's 413, on a route whose body vLLM-Omni would read and parse whole."""
    body = b'{"model": "omni-tiny", "prompt": "' + b"x" * BODY_LIMIT + b'"}'
    content = (body[i : i + 65536] for i in range(0, len(body), 65536)) if chunked else body
    response = httpx.post(
        f"{server.url}/v1/images/generations",
        content=content,
        headers={"content-type": "application/json"},
        timeout=TIMEOUT,
    )
    assert response.status_code == 413, response.text
    error = error_of(response)
    assert (error["code"], error["type"]) == (413, "RequestEntityTooLargeError")
    assert error["message"] == f"the request body is larger than this server's limit of {BODY_LIMIT} bytes"
    assert server.images("a cat", timeout=TIMEOUT).status_code == 200


def test_the_document_states_the_error_contract_of_every_operation(server: OmniServer) -> None:
    """`/openapi.json` with the plugin: every operation declares what it can answer, with the record's
    one schema (ours, `omni_errors.server.openapi`) where the route declared nothing of its own
    (`/v1/messages` keeps its `AnthropicErrorResponse`), and none FastAPI's 422 it never sends."""
    document = server.get("/openapi.json").json()
    schemas = document["components"]["schemas"]
    assert {name: schemas[name] for name in ERROR_SCHEMAS} == ERROR_SCHEMAS
    assert "HTTPValidationError" not in json.dumps(document["paths"])
    ours = 0
    for path, item in document["paths"].items():
        for method, operation in item.items():
            expected = {*API_ERROR_STATUSES, *((404,) if "{" in path else ())}
            declared = operation["responses"]
            missing = sorted(status for status in expected if str(status) not in declared)
            assert not missing, f"{method.upper()} {path} does not declare {missing}"
            for status in expected:
                ref = declared[str(status)]["content"]["application/json"]["schema"]["$ref"]
                assert ref.rpartition("/")[2] in schemas, (method, path, status)
                ours += ref == "#/components/schemas/ErrorResponse"
    assert ours > 100


# -- Schemathesis ---------------------------------------------------------------------------------

#: Left out of the fuzzing, with the reason: the routes that change the server's state for every
#: request after them (tested above, in order), and vLLM's development routes (not the deployment's
#: surface; `/collective_rpc` calls any worker method).
NOT_FUZZED = (
    r"^/v1/omni/(sleep|wakeup)$"
    r"|^/(pause|resume|is_paused|sleep|wake_up|is_sleeping|collective_rpc|reset_prefix_cache|reset_mm_cache"
    r"|reset_encoder_cache|server_info|get_world_size|init_weight_transfer_engine|update_weights"
    r"|start_profile|stop_profile|abort_requests|release_kv_cache_memory)$"
)
EXAMPLES = 5  # per operation and mode: the module's whole run stays within about two minutes of CI


def test_every_failure_the_baseline_keeps_says_why() -> None:
    entries = json.loads(BASELINE.read_text(encoding="utf-8"))["entries"]
    assert entries and all(isinstance(entry.get("reason"), str) and entry["reason"] for entry in entries)


def _checks() -> list[Any]:
    """Schemathesis's every check, and ours on every error body (`http_contract`, registered when
    imported: the record's shape, `error.code` equal to the status, no internals)."""
    from schemathesis.checks import load_all_checks

    load_all_checks()
    checks = [check for check in CHECKS.get_all() if not is_check_class(check)]
    assert error_body_is_the_record in checks
    return checks


def _unexplained(case: Any, response: Any, baseline: Baseline) -> list[tuple[str, Failure]]:
    """Every check on `case`'s `response`; the failures the baseline does not hold, with their
    check's name (added to the baseline with `UPDATE_ENV`)."""
    found: list[tuple[str, Failure]] = []
    for check in _checks():
        try:
            case.validate_response(response, checks=[check])
        except (FailureGroup, Failure) as raised:
            for failure in raised.exceptions if isinstance(raised, FailureGroup) else [raised]:
                if baseline.match(failure, check.__name__) is None:
                    found.append((check.__name__, failure))
                    known = {entry.identity for entry in baseline.entries}
                    if os.environ.get(UPDATE_ENV) and failure_identity(failure, check.__name__) not in known:
                        baseline.entries.append(BaselineEntry.from_failure(failure, check=check.__name__))
                        baseline.save(BASELINE)  # a reviewer then gives each new entry its reason
    return found


def _new_failures(case: Any, baseline: Baseline) -> list[str]:
    """Call `case` (within the deadline: an unanswered request raises) and run every check on its
    answer; the failures the baseline does not hold."""
    response = case.call(timeout=TIMEOUT)
    return [
        f"{case.method} {case.path} {response.status_code} {name}: {failure.title}"
        for name, failure in _unexplained(case, response, baseline)
    ]


def test_every_operation_under_schemathesis(server: OmniServer) -> None:
    """Every check, on every operation but the ones left out, positive and negative cases; a
    failure passes only when the committed baseline (`schemathesis-baseline.json`, Schemathesis's
    own format) holds it with its reason: each is vLLM-Omni's or vLLM's, kept because the plugin
    does not own it. (Schemathesis's Python API: its lazy pytest fixture fails on pytest 9.2.)"""
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json").exclude(path_regex=NOT_FUZZED)
    baseline = Baseline.load(BASELINE)
    new: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=operation.as_strategy(generation_mode=mode))
            @settings(
                max_examples=EXAMPLES,
                derandomize=True,
                deadline=None,
                phases=[Phase.generate],
                suppress_health_check=list(HealthCheck),
                database=None,
            )
            def run(case: Any) -> None:
                new.extend(_new_failures(case, baseline))

            try:
                run()
            except Unsatisfiable:  # no case of this mode exists (a negative case of an operation without inputs)
                continue
    assert not new, "failures not in the baseline:\n" + "\n".join(sorted(set(new)))


def test_a_failed_video_job_reads_back_under_schemathesis_links(server: OmniServer) -> None:
    """Schemathesis's state machine over the video job routes, its links inferred from the document
    (`POST /v1/videos` -> `GET /v1/videos/{video_id}`, its content, its `DELETE`), positive cases:
    every job this server makes fails (its model serves images: "No final video output stage", 503),
    and reading it back answers what docs/errors.md says for every job. Every check runs on every
    step; a failure passes only when the baseline holds it (the creation's form, vLLM-Omni's) or it
    is a failed job's content answering its stored 503 (`not_a_server_error` counts every 5xx)."""
    config = schemathesis.Config.from_dict({"generation": {"mode": "positive"}})
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=config)
    baseline = Baseline.load(BASELINE)
    new: list[str] = []
    read_back: list[dict[str, Any]] = []

    # The list is left out: its links read whatever jobs earlier runs left, and Hypothesis requires
    # each run to draw the same kinds of values as the one before.
    jobs = schema.include(path_regex=r"^/v1/videos(/\{video_id\}(/content)?)?$").exclude(
        path="/v1/videos", method="GET"
    )

    class Links(jobs.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"timeout": TIMEOUT}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            if (case.method, case.operation.path, response.status_code) == ("GET", "/v1/videos/{video_id}", 200):
                read_back.append(response.json())
            for name, failure in _unexplained(case, response, baseline):
                if name == "not_a_server_error" and _is_a_failed_jobs_stored_record(response):
                    continue
                new.append(f"{case.method} {case.path} {response.status_code} {name}: {failure.title}")

    steps = settings(
        max_examples=EXAMPLES * 4,
        stateful_step_count=6,
        derandomize=True,
        deadline=None,
        phases=[Phase.generate],  # no replay: the server's jobs, which links read, change between runs
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    run_state_machine_as_test(Links, settings=steps)
    assert not new, "failures not in the baseline:\n" + "\n".join(sorted(set(new)))
    failed = [job for job in read_back if job["status"] == "failed"]
    assert failed, f"no failed job was read back ({len(read_back)} reads)"
    for job in failed:  # the whole record, as the document's `VideoError` declares it
        assert set(job["error"]) == {"code", "message", "type", "param", "request_id", "stage_id"}, job
        assert (job["error"]["code"], job["error"]["type"]) == (503, "ServiceUnavailableError"), job


def test_a_client_generated_from_the_document_reads_a_failed_video_job_back(server: OmniServer, tmp_path: Path) -> None:
    """openapi-python-client on the server's `/openapi.json` (vLLM's own schemas it cannot read are
    left out with a warning: the video routes are not among them): its `retrieve_video` parses a
    failed job as a `VideoResponse` whose `VideoError` is the whole record, its `download_video` the
    stored record as an `ErrorResponse` with its status."""
    (tmp_path / "openapi.json").write_text(server.get("/openapi.json").text)
    (tmp_path / "config.yaml").write_text("post_hooks: []\npackage_name_override: omni_client\n")
    tool = Path(sys.executable).with_name("openapi-python-client")
    args = ["generate", "--path", "openapi.json", "--config", "config.yaml", "--meta", "none"]
    done = subprocess.run([str(tool), *args, "--output-path", "omni_client"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(tmp_path))
    try:
        api = "omni_client.api.default"
        retrieve = importlib.import_module(f"{api}.retrieve_video_v1_videos_video_id_get")
        download = importlib.import_module(f"{api}.download_video_v1_videos_video_id_content_get")
        models = importlib.import_module("omni_client.models")
        created = httpx.post(f"{server.url}/v1/videos", data={"prompt": "a cat"}, timeout=TIMEOUT)
        assert created.status_code == 200, created.text
        video_id = created.json()["id"]
        generated = importlib.import_module("omni_client").Client
        with generated(base_url=server.url, timeout=httpx.Timeout(TIMEOUT), raise_on_unexpected_status=True) as client:
            metadata = _ended(lambda: retrieve.sync_detailed(client=client, video_id=video_id))
            content = download.sync_detailed(client=client, video_id=video_id)
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "omni_client"]:
            del sys.modules[name]
    assert metadata.status_code == 200 and isinstance(metadata.parsed, models.VideoResponse), metadata.content
    assert metadata.parsed.status.value == "failed"
    error = metadata.parsed.error
    assert isinstance(error, models.VideoError)
    assert (error.code, error.type_, error.param) == (503, "ServiceUnavailableError", None)
    assert "No final video output stage" in error.message
    assert content.status_code == 503 and isinstance(content.parsed, models.ErrorResponse), content.content
    assert content.parsed.error.to_dict() == {k: v for k, v in error.to_dict().items() if v is not None or k == "param"}


def _ended(read: Callable[[], Any]) -> Any:
    """`read()` (a job's metadata) once the job is neither queued nor in progress, within the deadline."""
    deadline = time.monotonic() + TIMEOUT
    while (response := read()).status_code == 200 and response.parsed.status.value in ("queued", "in_progress"):
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.05)
    return response


def _is_a_failed_jobs_stored_record(response: Any) -> bool:
    """`response` is a job's content, the job failed, and the answer is the record its metadata
    embeds, with that record's status."""
    url = str(response.request.url)
    if not url.endswith("/content"):
        return False
    metadata = httpx.get(url.removesuffix("/content"), timeout=TIMEOUT)
    if metadata.status_code != 200 or metadata.json().get("status") != "failed":
        return False
    stored = {k: v for k, v in metadata.json()["error"].items() if v is not None or k == "param"}
    return response.status_code == stored["code"] and response.json() == {"error": stored}


def test_a_level_2_sleep_answers_every_request_and_its_wake_up_names_the_stage(server: OmniServer) -> None:
    """Last: vLLM-Omni 0.30 cannot wake a level-2 sleep (the weights are gone)."""
    assert sleep(server, level=2).status_code == 200
    assert_refused(server.images("a cat", timeout=TIMEOUT), "level 2", "restart the server")
    response = wake(server)
    assert response.status_code == 501, response.text
    assert (error_of(response)["type"], error_of(response)["stage_id"]) == ("NotImplementedError", 0)
    assert health(server)["status"] == "sleeping (level 2)"
