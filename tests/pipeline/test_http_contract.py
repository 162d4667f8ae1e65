"""`omni-errors serve`'s HTTP surface against its own OpenAPI document, by tools nobody here wrote.

The app is `build_app`'s, in this process over ASGI (no server start), its pipeline real: the three
stage processes start on a loop of this process's own (`OnLoop`) and stop at the module's end.
Two clients read the document:

- Schemathesis (its pytest integration): every operation, every check, plus ours
  (`http_contract.error_body_is_the_record`: the record's shape, `error.code` == status, no
  internals), each request answered within `DEADLINE_S` (the ASGI client's timeout, and
  Schemathesis's `max_response_time`);
- a client generated from the document by openapi-python-client, which must parse every error
  the fuzzer got and, through its own per-operation functions, each error status a case below provokes.

The app's HTTP metrics (registered by the instrumentator at its first request) are removed at the
end, so that an app instrumented later in this process (tests/server's) finds the names free.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import httpx
import pytest
import schemathesis
from http_contract import error_body_is_the_record
from hypothesis import HealthCheck, Phase, settings
from hypothesis.stateful import run_state_machine_as_test
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.lifecycle import LifecycleConfig, Supervisor
from omni_errors_tools.pipeline.app import build_app
from omni_errors_tools.pipeline.schemas import Limits
from omni_errors_tools.pipeline.service import PipelineConfig, Service
from prometheus_client import REGISTRY
from schemathesis.checks import CHECKS, is_check_class, load_all_checks
from schemathesis.core.failures import FailureGroup
from starlette.types import ASGIApp, Message, Receive, Scope, Send

T = TypeVar("T")
DEADLINE_S = 30.0  # every request is answered by then, whatever it asks
# Short generations: the fuzzer's valid requests stay quick. Request faults on: the job tests fail
# a job on purpose (`X-Omni-Fault: stage_error`); a fuzzer's text names no fault kind (400).
LIMITS = Limits(max_tokens=8, default_max_tokens=4, max_body_bytes=64 << 10, allow_request_faults=True)
FAILING = {"x-omni-fault": "stage_error;stage=1"}  # a non-fatal failure of stage 1: the stage serves on
MAX_EXAMPLES = 12  # per operation and phase; the module stays well under a minute


class OnLoop:
    """The app, served on the loop its pipeline runs on (a thread of this process), to callers on
    any other loop: Schemathesis's ASGI client runs its own, and ends a lifespan after each test."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="contract-app", daemon=True)
        self._thread.start()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = asyncio.get_running_loop()

        def there(coro: Awaitable[T], loop: asyncio.AbstractEventLoop) -> asyncio.Future[T]:
            return asyncio.wrap_future(asyncio.run_coroutine_threadsafe(_awaited(coro), loop))

        async def received() -> Message:
            return await there(receive(), caller)

        async def sent(message: Message) -> None:
            await there(send(message), caller)

        await there(self.app(scope, received, sent), self.loop)

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the app's loop, from the test's thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(DEADLINE_S * 4)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(DEADLINE_S)
        self.loop.close()


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable


@dataclass
class Contract:
    app: OnLoop
    client: ModuleType  # the generated package
    supervisor: Supervisor


@contextlib.contextmanager
def _instrumentation_removed() -> Iterator[None]:
    """Unregister, on leaving, the HTTP metrics (`http_*`) the instrumentator registers meanwhile:
    it creates them when the app's middleware stack is built, at its first request."""
    added: list[Any] = []
    register = REGISTRY.register

    def recording(collector: Any) -> None:
        register(collector)
        added.append(collector)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(REGISTRY, "register", recording)
        try:
            yield
        finally:
            for collector in added:
                if all(metric.name.startswith("http_") for metric in collector.describe()):
                    REGISTRY.unregister(collector)


def _generate_client(document: dict[str, Any], where: Path) -> ModuleType:
    (where / "openapi.json").write_text(json.dumps(document))
    (where / "config.yaml").write_text("post_hooks: []\npackage_name_override: contract_client\n")
    tool = Path(sys.executable).with_name("openapi-python-client")
    args = ["generate", "--path", "openapi.json", "--config", "config.yaml", "--meta", "none"]
    done = subprocess.run([str(tool), *args, "--output-path", "contract_client", "--fail-on-warning"], cwd=where,
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(where))
    return importlib.import_module("contract_client")


def _document() -> dict[str, Any]:
    """The app's OpenAPI document, read before any test runs (Schemathesis parametrizes from it at
    collection), from an app built for it alone."""
    with _instrumentation_removed():
        document: dict[str, Any] = build_app(Service(PipelineConfig(), LifecycleConfig()), LIMITS).openapi()
    return document


DOCUMENT = _document()
schema = schemathesis.openapi.from_dict(
    DOCUMENT, config=schemathesis.Config.from_dict({"checks": {"max_response_time": DEADLINE_S}})
)


@pytest.fixture(scope="module")
def contract(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Contract]:
    service = Service(PipelineConfig(step_interval=0.002), LifecycleConfig(startup_timeout=120, shm_prefix="omni_c24_"))
    supervisor = service.supervisor
    pids: list[int] = []
    with _instrumentation_removed():
        served = OnLoop(build_app(service, LIMITS))
        try:
            served.run(supervisor.start())
            pids += supervisor.pids
            client = _generate_client(DOCUMENT, tmp_path_factory.mktemp("generated"))
            yield Contract(served, client, supervisor)
        finally:
            served.run(supervisor.shutdown(exit_code=ExitCode.OK))
            served.run(supervisor.wait_dead())
            served.close()
            sys.path[:] = [p for p in sys.path if "generated" not in Path(p).name]
            for name in [m for m in sys.modules if m.split(".")[0] == "contract_client"]:
                del sys.modules[name]
    left = [pid for pid in pids if Path(f"/proc/{pid}").exists()]
    assert not left, f"stage processes left running: {left}"


@schema.parametrize()
@settings(max_examples=MAX_EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_every_check(case: schemathesis.Case[Any], contract: Contract) -> None:
    response = case.call_and_validate(app=contract.app, timeout=DEADLINE_S)
    if response.status_code >= 400:  # the generated client reads it as the document says
        body = response.json()
        assert _generated(contract, "models").ErrorResponse.from_dict(body).to_dict() == body


def _generated(contract: Contract, module: str) -> Any:
    return importlib.import_module(f"{contract.client.__name__}.{module}")


def _call(contract: Contract, operation: Any, kwargs: dict[str, Any]) -> Any:
    """`operation` of the generated client (its `asyncio_detailed`), over ASGI on the app's loop."""

    async def call() -> Any:
        transport = httpx.ASGITransport(app=contract.app.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://contract") as http:
            client = contract.client.Client(base_url="http://contract", raise_on_unexpected_status=True)
            client.set_async_httpx_client(http)
            return await operation.asyncio_detailed(client=client, **kwargs)

    return contract.app.run(call())


def _job_operations(contract: Contract) -> tuple[Any, Any, Any]:
    """The generated client's create, metadata and content operations of `/v1/jobs`."""
    api = _generated(contract, "api.default").__name__
    names = ("create_job_v1_jobs_post", "get_job_v1_jobs_job_id_get", "get_job_content_v1_jobs_job_id_content_get")
    create, get, content = (importlib.import_module(f"{api}.{name}") for name in names)
    return create, get, content


def _failed_metadata(contract: Contract, job_id: str) -> Any:
    """The generated client's read of a job's metadata once the job has ended (within the deadline)."""
    get = _job_operations(contract)[1]
    deadline = time.monotonic() + DEADLINE_S
    while True:
        response = _call(contract, get, {"job_id": job_id})
        if response.status_code != 200 or response.parsed.status.value not in ("queued", "in_progress"):
            return response
        assert time.monotonic() < deadline, f"job {job_id} still {response.parsed.status.value}"
        time.sleep(0.05)


def test_a_generated_client_reads_a_failed_job_back(contract: Contract) -> None:
    """docs/errors.md, "Async jobs", through the client the document generates: the metadata of a job
    whose stage failed is 200, a `Job` whose `error` is the whole record; its content is that record
    with its status, an `ErrorResponse`."""
    models = _generated(contract, "models")
    create, _, content = _job_operations(contract)
    body = models.JobRequest.from_dict({**SPEECH, "id": "failed-job"})
    created = _call(contract, create, {"body": body, "x_omni_fault": FAILING["x-omni-fault"]})
    assert created.status_code == 200 and isinstance(created.parsed, models.Job), created.content
    metadata = _failed_metadata(contract, "failed-job")
    assert metadata.status_code == 200 and isinstance(metadata.parsed, models.Job), metadata.content
    assert metadata.parsed.status.value == "failed"
    error = metadata.parsed.error
    assert isinstance(error, models.ErrorInfo)
    assert (error.code, error.type_, error.request_id, error.stage_id) == (500, "InternalServerError", "failed-job", 1)
    assert error.param is None and error.message
    stored = _call(contract, content, {"job_id": "failed-job"})
    assert stored.status_code == 500 and isinstance(stored.parsed, models.ErrorResponse), stored.content
    assert stored.parsed.error.to_dict() == error.to_dict()


def test_a_failed_job_reads_back_under_schemathesis_links(contract: Contract) -> None:
    """Schemathesis's state machine over `/v1/jobs`, its links inferred from the document (`POST
    /v1/jobs` -> `GET /v1/jobs/{job_id}`, its content), each job created a valid one made to fail in
    stage 1 (the creation's own cases are the module's first test's): every check passes on every
    step, but a failed job's content answering its stored 500
    (`not_a_server_error` counts every 5xx), which must be the record its metadata embeds."""
    models = _generated(contract, "models")
    new: list[str] = []
    read_back: list[dict[str, Any]] = []

    config = {"checks": {"max_response_time": DEADLINE_S}, "generation": {"mode": "positive"}}
    jobs = schemathesis.openapi.from_dict(DOCUMENT, config=schemathesis.Config.from_dict(config))

    class Links(jobs.include(path_regex=r"^/v1/jobs").as_state_machine()):  # type: ignore[misc]
        def before_call(self, case: schemathesis.Case[Any]) -> None:
            if case.method == "POST":  # a valid job, failing in its stage 1: the links read it back
                case.headers = {**(case.headers or {}), **FAILING}
                case.body = dict(SPEECH)

        def get_call_kwargs(self, case: schemathesis.Case[Any]) -> dict[str, Any]:
            return {"app": contract.app, "timeout": DEADLINE_S}

        def validate_response(self, response: Any, case: schemathesis.Case[Any], **kwargs: Any) -> None:
            if (case.operation.path, response.status_code) == ("/v1/jobs/{job_id}", 200):
                read_back.append(response.json())
            try:
                case.validate_response(response, checks=_every_check())
            except FailureGroup as raised:
                for failure in raised.exceptions:
                    if failure.title == "Server error" and _is_the_stored_record(contract, case, response):
                        continue
                    new.append(f"{case.method} {case.path} {response.status_code}: {failure.title}")

    steps = settings(
        max_examples=MAX_EXAMPLES,
        stateful_step_count=6,
        derandomize=True,
        deadline=None,
        phases=[Phase.generate],  # no replay: the jobs the links read change between runs
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    run_state_machine_as_test(Links, settings=steps)
    assert not new, "\n".join(sorted(set(new)))
    failed = [job for job in read_back if job["status"] == "failed"]
    assert failed, f"no failed job was read back ({len(read_back)} reads)"
    for job in failed:  # what the generated client parses as a `Job` with its `ErrorInfo`
        assert models.Job.from_dict(job).to_dict() == job
        assert set(job["error"]) == {"message", "type", "param", "code", "request_id", "stage_id"}, job


def _every_check() -> list[Any]:
    """Schemathesis's every check (its CLI's `--checks all`), ours among them (`http_contract`)."""
    load_all_checks()
    checks = [check for check in CHECKS.get_all() if not is_check_class(check)]
    assert error_body_is_the_record in checks
    return checks


def _is_the_stored_record(contract: Contract, case: schemathesis.Case[Any], response: Any) -> bool:
    """`response` is a failed job's content, and is the record its metadata embeds, with its status."""
    if not case.operation.path.endswith("/content"):
        return False
    metadata = _failed_metadata(contract, case.path_parameters["job_id"])
    stored = metadata.parsed.error.to_dict() if metadata.status_code == 200 and metadata.parsed.error else None
    return stored is not None and response.status_code == stored["code"] and response.json() == {"error": stored}


def test_the_document_has_one_error_schema_and_no_unsent_422() -> None:
    envelope = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}}
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            responses = operation["responses"]
            assert {"413", "500"} <= set(responses), (method, path)
            assert all(r["content"] == envelope for s, r in responses.items() if int(s) >= 400), (method, path)
            # Only undecodable media is 422 (VLLMUnprocessableEntityError); validation is 400.
            assert ("422" in responses) == (path == "/v1/chat/completions"), (method, path)
    assert not {"HTTPValidationError", "ValidationError"} & set(DOCUMENT["components"]["schemas"])


CHAT = {"model": LIMITS.model, "messages": [{"role": "user", "content": "hi"}]}
SPEECH = {"model": LIMITS.model, "input": "hello"}
AUDIO_PART = {"type": "input_audio", "input_audio": {"data": "not base64!", "format": "wav"}}


def test_a_generated_client_parses_each_error_status(contract: Contract) -> None:
    """Each operation's errors, provoked for real and read by the generated client's own functions."""
    api, models = _generated(contract, "api.default"), _generated(contract, "models")
    chat = importlib.import_module(f"{api.__name__}.chat_v1_chat_completions_post")
    speech = importlib.import_module(f"{api.__name__}.speech_v1_audio_speech_post")
    create, get, content = _job_operations(contract)
    health = importlib.import_module(f"{api.__name__}.health_health_get")
    big = "x" * LIMITS.max_body_bytes
    live: list[tuple[int, Any, dict[str, Any]]] = [
        (400, chat, {"body": models.ChatRequest.from_dict({**CHAT, "messages": []})}),
        (404, chat, {"body": models.ChatRequest.from_dict({**CHAT, "model": "nope"})}),
        (413, chat, {"body": models.ChatRequest.from_dict({**CHAT, "messages": [{"role": "user", "content": big}]})}),
        (
            422,
            chat,
            {"body": models.ChatRequest.from_dict({**CHAT, "messages": [{"role": "user", "content": [AUDIO_PART]}]})},
        ),
        (400, speech, {"body": models.SpeechRequest.from_dict({**SPEECH, "voice": "alto"})}),
        (404, speech, {"body": models.SpeechRequest.from_dict({**SPEECH, "model": "nope"})}),
        (200, create, {"body": models.JobRequest.from_dict({**SPEECH, "id": "contract-job"})}),
        (409, create, {"body": models.JobRequest.from_dict({**SPEECH, "id": "contract-job"})}),
        (400, create, {"body": models.JobRequest.from_dict({**SPEECH, "id": "bad\u0001id"})}),
        (404, get, {"job_id": "no-such-job"}),
        (404, content, {"job_id": "no-such-job"}),
    ]
    stopped: list[tuple[int, Any, dict[str, Any]]] = [
        (503, health, {}),
        (503, chat, {"body": models.ChatRequest.from_dict(CHAT)}),
        (503, speech, {"body": models.SpeechRequest.from_dict(SPEECH)}),
        (503, create, {"body": models.JobRequest.from_dict(SPEECH)}),
    ]

    def check(cases: list[tuple[int, Any, dict[str, Any]]]) -> None:
        for status, operation, kwargs in cases:
            response = _call(contract, operation, kwargs)
            assert response.status_code == status, (operation.__name__, response.content)
            if status >= 400:
                assert isinstance(response.parsed, models.ErrorResponse), operation.__name__
                assert response.parsed.error.code == status
                if status == 503:
                    assert int(response.headers["Retry-After"]) > 0

    check(live)
    contract.app.run(contract.supervisor.shutdown(exit_code=ExitCode.OK))  # as SIGTERM would
    contract.app.run(contract.supervisor.wait_dead())
    check(stopped)
