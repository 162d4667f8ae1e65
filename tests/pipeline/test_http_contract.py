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
from collections.abc import Awaitable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.lifecycle import LifecycleConfig, Supervisor
from omni_errors_tools.pipeline.app import build_app
from omni_errors_tools.pipeline.schemas import Limits
from omni_errors_tools.pipeline.service import PipelineConfig, Service
from prometheus_client import REGISTRY
from starlette.types import ASGIApp, Message, Receive, Scope, Send

T = TypeVar("T")
DEADLINE_S = 30.0  # every request is answered by then, whatever it asks
LIMITS = Limits(
    max_tokens=8, default_max_tokens=4, max_body_bytes=64 << 10
)  # short generations: the fuzzer's valid requests stay quick
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
    create = importlib.import_module(f"{api.__name__}.create_job_v1_jobs_post")
    get = importlib.import_module(f"{api.__name__}.get_job_v1_jobs_job_id_get")
    content = importlib.import_module(f"{api.__name__}.get_job_content_v1_jobs_job_id_content_get")
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

    async def call(operation: Any, kwargs: dict[str, Any]) -> Any:
        transport = httpx.ASGITransport(app=contract.app.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://contract") as http:
            client = contract.client.Client(base_url="http://contract", raise_on_unexpected_status=True)
            client.set_async_httpx_client(http)
            return await operation.asyncio_detailed(client=client, **kwargs)

    def check(cases: list[tuple[int, Any, dict[str, Any]]]) -> None:
        for status, operation, kwargs in cases:
            response = contract.app.run(call(operation, kwargs))
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
