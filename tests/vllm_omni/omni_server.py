"""The real `vllm-omni serve MODEL --omni` on loopback, for the tests: start, talk to, end, inspect.

The command, model folder and environment are the chaos target's (`VllmOmniTarget`), so the tests
and `omni-errors chaos --target vllm-omni` run the same server. The server runs in its own session;
`close()` ends the whole process group (SIGTERM, then SIGKILL) on every path, and `leftovers()`
names any process or shared-memory segment it left behind.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from omni_errors_tools.chaos.scenarios.vllm_omni import MODEL, VllmOmniTarget
from omni_errors_tools.chaos.scenarios.vllm_omni_llm import STARTUP_S_PER_PROCESS, LlmTarget, chat_body
from omni_errors_tools.chaos.target import Launch, Target
from omni_errors_tools.chaos.watch import ProcessWatcher, free_port, kill, shm_entries

__all__ = [
    "CORE_ONLY",
    "IMAGES",
    "MODEL",
    "TEST_ENV",
    "UPSTREAM_TREE",
    "OmniServer",
    "assert_clean_exit",
    "error_of",
    "image_body",
    "llm_server",
    "serve",
    "upstreamed_logged",
]

HOST = "127.0.0.1"
IMAGES = "/v1/images/generations"
STARTUP_TIMEOUT = 600.0  # a cold import of vLLM-Omni on two shared cores takes minutes
STOP_GRACE = 10.0
#: The plugin's bounds for a loaded test machine: a fatal stop waits up to 10 s (not 3) for the
#: answers in flight to be written (the strict figure is the chaos report's, on the default).
TEST_ENV = {"OMNI_ERRORS_ANSWER_DEADLINE_S": "10"}
#: Set by `make upstream-test`: the suites run on the upstream series' tree, first on the path.
UPSTREAM_TREE = os.environ.get("OMNI_ERRORS_UPSTREAM_TREE")
#: Set by `make pytest-upstream-core`: on the series' tree, vLLM loads no plugin of omni-errors
#: (`VLLM_PLUGINS` names only the fake engines), as where only the core distribution is installed.
CORE_ONLY = os.environ.get("OMNI_ERRORS_CORE_ONLY") == "1"
FAKE_ENGINE_PLUGINS = "omni_errors_fake_diffusion,omni_errors_fake_llm"


def image_body(prompt: str) -> dict[str, Any]:
    """The body of an image request (`/v1/images/generations`) for `prompt`, as every test sends it."""
    return {"model": MODEL, "prompt": prompt, "size": "16x16"}


class OmniServer:
    """One server; use as a context manager (or call `start()` and `close()`)."""

    def __init__(
        self,
        workdir: Path,
        *,
        plugin: bool,
        subprocess_stage: bool = False,
        env: dict[str, str] | None = None,
        target: Target | None = None,
        startup_timeout: float = STARTUP_TIMEOUT,
    ) -> None:
        """The diffusion server (inline, or `subprocess_stage`), or any chaos `target` (LLM stages,
        whose stage processes start one after another: give them a `startup_timeout` to match)."""
        self.workdir = workdir
        self.startup_timeout = startup_timeout
        self.env = {**TEST_ENV, **(env or {})}
        self.target = target or VllmOmniTarget(plugin=plugin, subprocess=subprocess_stage)
        self.port = free_port(HOST)
        self.marker = workdir / "fault"
        self.log_path = workdir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self._watcher: ProcessWatcher | None = None
        self._stop = threading.Event()
        self._shm_before = shm_entries()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> OmniServer:
        launch = Launch(sys.executable, HOST, self.port, self.marker, 0.0, self.startup_timeout)
        command = self.target.command(launch)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                command.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env={**os.environ, **command.env, **self.env},
            )
        self._watcher = ProcessWatcher(self.proc.pid)
        threading.Thread(target=self._watch, daemon=True).start()
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm-omni serve exited with {self.proc.returncode} while starting:\n{self.tail()}")
            try:
                if httpx.get(f"{self.url}/health", timeout=2.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise RuntimeError(f"vllm-omni serve did not answer /health within {self.startup_timeout:g}s:\n{self.tail()}")

    def _watch(self) -> None:
        assert self._watcher is not None
        while not self._stop.wait(0.2):
            self._watcher.poll()

    def __enter__(self) -> OmniServer:
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- talking to it --------------------------------------------------------------------------

    def images(self, prompt: str, *, timeout: float = 60.0) -> httpx.Response:
        return httpx.post(f"{self.url}{IMAGES}", json=image_body(prompt), timeout=timeout)

    def chat(self, prompt: str, *, timeout: float = 60.0, audio: bool = False) -> httpx.Response:
        """A chat request; `audio` asks for the audio of an LLM pipeline's code2wav stage too."""
        return httpx.post(f"{self.url}/v1/chat/completions", json=chat_body(prompt, audio=audio), timeout=timeout)

    def chats_in_order(self, prompts: list[str], *, gap: float = 0.5, timeout: float = 60.0) -> list[httpx.Response]:
        """Chat requests sent `gap` seconds apart, all in flight together (as `in_order` sends images)."""
        return self.in_order(prompts, gap=gap, timeout=timeout, path="/v1/chat/completions")

    def in_order(
        self, prompts: list[str], *, gap: float = 0.5, timeout: float = 60.0, path: str = IMAGES
    ) -> list[httpx.Response]:
        """Image requests (chat requests with `path` the chat route) sent `gap` seconds apart (so the
        engine queues them in this order), all in flight together; a request that gets no answer
        within `timeout` raises `httpx.ReadTimeout`.

        Each request goes on a connection opened before the first is sent: at a load of 20, building a
        client and connecting inside the gap took long enough for a later request to overtake an
        earlier one."""
        from concurrent.futures import ThreadPoolExecutor

        clients = [httpx.Client(base_url=self.url, timeout=timeout) for _ in prompts]
        try:
            for client in clients:
                client.get("/health").raise_for_status()  # opens the connection its request will use
            with ThreadPoolExecutor(len(prompts)) as pool:
                futures = []
                for client, prompt in zip(clients, prompts, strict=True):
                    body = image_body(prompt) if path == IMAGES else chat_body(prompt)
                    futures.append(pool.submit(client.post, path, json=body))
                    time.sleep(gap)
                return [f.result() for f in futures]
        finally:
            for client in clients:
                client.close()

    def get(self, path: str, *, timeout: float = 60.0) -> httpx.Response:
        # A deadline, not a speed bound: the first /openapi.json builds every route's schema, which
        # took over 10 s on CI's loaded machine.
        return httpx.get(f"{self.url}{path}", timeout=timeout)

    def metric(self, name: str, **labels: str) -> float:
        """The sum of the samples of `name` whose labels include `labels` (0 when there are none)."""
        from prometheus_client.parser import text_string_to_metric_families

        total = 0.0
        for family in text_string_to_metric_families(self.get("/metrics").text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                    total += sample.value
        return total

    def wait_for_fault(self, timeout: float = 60.0) -> None:
        """Until a fault fired in a stage (the fake engines write `marker`): the stage is busy with
        the request that asked for it. Fails when none did within `timeout`."""
        deadline = time.monotonic() + timeout
        while not self.marker.exists():
            assert time.monotonic() < deadline, "the request never reached the stage"
            time.sleep(0.05)

    # -- ending it ------------------------------------------------------------------------------

    def interrupt(self) -> None:
        """Ctrl+C in the server's terminal: SIGINT to its whole process group."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGINT)

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code, or None if the server is still running after `timeout` seconds."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def close(self) -> None:
        """End the process group (SIGTERM, then SIGKILL) and every process it started."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            if self.wait_exit(STOP_GRACE) is None:
                try:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        self._stop.set()
        if self._watcher is not None:
            kill(self._watcher.orphans())

    def leftovers(self) -> tuple[list[int], list[str]]:
        """(stage processes still alive, shm segments left) once the server has exited."""
        assert self._watcher is not None
        time.sleep(0.3)
        self._watcher.poll()
        return self._watcher.orphans(), self._watcher.shm_left(self._shm_before)

    def tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def error_of(response: httpx.Response) -> dict[str, Any]:
    """The nested `error` object of an error response."""
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), dict), body
    return body["error"]


def serve(
    tmp_path_factory: pytest.TempPathFactory, *, plugin: bool, subprocess_stage: bool, env: dict[str, str] | None = None
) -> Iterator[OmniServer]:
    """A started server for a module fixture; closed (with its processes) however the module ends.
    `env` adds to the server's environment (e.g. vLLM's `VLLM_SERVER_DEV_MODE`)."""
    name = f"omni-{'on' if plugin else 'off'}-{'proc' if subprocess_stage else 'inline'}"
    workdir = tmp_path_factory.mktemp(name)
    if CORE_ONLY:
        env = {**(env or {}), "VLLM_PLUGINS": FAKE_ENGINE_PLUGINS}
    with OmniServer(workdir, plugin=plugin, subprocess_stage=subprocess_stage, env=env) as server:
        yield server


def llm_server(workdir: Path, target: LlmTarget) -> OmniServer:
    """A server over LLM stages (not started), with a start bound for its stage processes, which
    vLLM-Omni starts one after another."""
    timeout = STARTUP_TIMEOUT + STARTUP_S_PER_PROCESS * target.processes
    return OmniServer(workdir, plugin=target.plugin, target=target, startup_timeout=timeout)


def assert_clean_exit(server: OmniServer) -> None:
    """No stage process and no shared-memory segment outlives the server."""
    orphans, shm = server.leftovers()
    assert orphans == [], f"stage processes left running: {orphans}"
    assert shm == [], f"shared memory left in /dev/shm: {shm}"


def upstreamed_logged(server: OmniServer) -> bool:
    """Whether the server's plugin said it patches nothing on the targets the series retired."""
    return "are upstreamed (nothing patched there)" in server.log()
