"""A real vLLM-Omni multi-node deployment for the tests: a head and `--headless` stages on two "hosts".

The hosts are two network namespaces joined by a veth pair (`tests/netns.py`): the head runs in
`a` (169.254.11.1), every remote stage in `b` (.2), and nothing else is reachable from either. The
head is `vllm-omni serve MODEL --omni --omni-master-address A --omni-master-port P --stage-id 1`:
the model is a one-stage pipeline, so its stage 0 is remote-only and served by whichever
`vllm-omni serve MODEL --omni --stage-id 0 --headless ...` registers: the fake diffusion engine's
image stage, or (`llm=True`) an LLM stage of the fake LLM engine (`omni_errors_chat`: vLLM's
EngineCore in the remote stage's process, its links vLLM's own engine-core sockets). HTTP requests
go to the head's port from a thread inside `a`. Each process runs in its own session; `close()`
ends every process group, and destroying the namespaces kills whatever is left.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import httpx
import psutil
import pytest
from netns import NetPair, call_in, remove_stale
from omni_errors.security import keys
from omni_errors.settings import REJOIN_WINDOW
from omni_errors_tools.chaos.scenarios.vllm_omni import MODEL, environment, model_dir
from omni_errors_tools.chaos.scenarios.vllm_omni_llm import CHAT, chat_body
from omni_errors_tools.chaos.watch import alive
from omni_errors_vllm_omni.settings import KEYS_ENV
from omni_server import IMAGES, TEST_ENV, image_body

__all__ = ["HTTP_PORT", "MODEL", "STARTUP_TIMEOUT", "Deployment", "Node", "deployment", "make_key_dirs"]

T = TypeVar("T")

HTTP_PORT = 8000
MASTER_PORT = 29700
STARTUP_TIMEOUT = 900.0  # a head or a stage takes 1-3 minutes to import and start on two busy cores
STOP_GRACE = 10.0


class Node:
    """One process of the deployment (the head, or a headless stage's launcher)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name = name
        self.log_path = log_path
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)

    def wait_exit(self, timeout: float) -> int | None:
        """The exit code, or None if still running after `timeout` seconds."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def signal_group(self, signum: int) -> None:
        try:
            os.killpg(self.proc.pid, signum)
        except ProcessLookupError:
            pass

    def close(self) -> None:
        """Stop the node and every process it started, whether or not the node itself has exited."""
        if self.proc.poll() is None:
            self.signal_group(signal.SIGTERM)
            if self.wait_exit(STOP_GRACE) is None:
                self.signal_group(signal.SIGKILL)
                self.proc.wait()
        # What it started may outlive it: vLLM-Omni's launcher exits while the proc it SIGTERMed stops.
        deadline = time.monotonic() + STOP_GRACE
        while self._group() and time.monotonic() < deadline:
            time.sleep(0.1)
        if self._group():
            self.signal_group(signal.SIGKILL)

    def _group(self) -> list[int]:
        """The live processes of this node's process group (its session: each node has its own)."""
        members = []
        for pid in psutil.pids():
            try:
                in_group = os.getpgid(pid) == self.proc.pid
            except ProcessLookupError:
                continue
            if in_group and alive(pid):
                members.append(pid)
        return members

    def stage_proc(self) -> int:
        """The pid of the stage process (StageDiffusionProc, or an LLM stage's StageEngineCoreProc)
        this remote stage's launcher started."""
        for child in psutil.Process(self.proc.pid).children(recursive=True):
            command = " ".join(child.cmdline())
            if "spawn_main" in command or "StageEngineCoreProc" in command:
                return child.pid
        raise LookupError(f"{self.name} runs no stage process")

    def replica_id(self) -> int:
        """The replica id the head gave this remote stage (its launcher logs it once registered)."""
        match = re.search(r"Diffusion replica id=(\d+) for stage|Stage \d+ replica id=(\d+) up", self.log())
        if match is None:
            raise LookupError(f"{self.name} has not registered")
        return int(match.group(1) or match.group(2))

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log().splitlines()[-lines:])


_DEFAULT: Any = object()


class Deployment:
    """A head and its remote stages, plugin on or off at each end; CURVE keys (a directory each for
    the head and the stages, as `omni-errors keys` makes them) optional; an image stage, or an LLM
    stage (`llm`)."""

    def __init__(
        self,
        workdir: Path,
        net: NetPair,
        *,
        plugin: bool,
        head_keys: Path | None = None,
        stage_keys: Path | None = None,
        window: float | None = None,
        llm: bool = False,
    ) -> None:
        self.workdir = workdir
        self.llm = llm
        self.net = net
        self.plugin = plugin
        self.head_keys = head_keys
        self.stage_keys = stage_keys
        self.window = window
        if llm:
            from omni_errors_fake_llm.model import deploy_yaml, model_dir as llm_model_dir

            self.model = llm_model_dir(workdir)
            self._serve_args = ["--deploy-config", str(deploy_yaml(workdir, CHAT))]
        else:
            self.model = model_dir(workdir)
            self._serve_args = []
        self.head: Node | None = None
        self.remotes: list[Node] = []
        self._pool = ThreadPoolExecutor(8, thread_name_prefix="multinode-client")

    # -- starting -------------------------------------------------------------------------------

    def _env(self, *, plugin: bool, keys: Path | None) -> dict[str, str]:
        env = {**os.environ, **environment(plugin=plugin, fault_marker=self.workdir / "fault"), **TEST_ENV}
        if self.llm:
            env.pop("OMNI_FAKE_DIFFUSION")
            env.update(OMNI_FAKE_LLM="1", OMNI_FAKE_LLM_MARKER=str(self.workdir / "fault"))
        env.pop(KEYS_ENV, None)
        if keys is not None:
            env[KEYS_ENV] = str(keys)
        if self.window is not None:
            env[REJOIN_WINDOW.name] = str(self.window)
        return env

    def _binary(self) -> str:
        return str(Path(sys.executable).with_name("vllm-omni"))

    def start_head(self) -> Node:
        argv = self.net.exec(self.net.a, self._binary(), "serve", str(self.model), "--omni", *self._serve_args)
        argv += ["--host", "127.0.0.1", "--port", str(HTTP_PORT), "--served-model-name", MODEL]
        argv += ["--omni-master-address", self.net.addr_a, "--omni-master-port", str(MASTER_PORT), "--stage-id", "1"]
        self.head = Node("head", argv, self._env(plugin=self.plugin, keys=self.head_keys), self.workdir / "head.log")
        return self.head

    def start_remote(self, *, plugin: bool | None = None, keys: Path | None = _DEFAULT) -> Node:
        """A headless stage 0; `plugin` and `keys` default to the deployment's."""
        chosen = self.stage_keys if keys is _DEFAULT else keys
        env = self._env(plugin=self.plugin if plugin is None else plugin, keys=chosen)
        env["VLLM_DEVICE_CONTROL_ENV_VAR_PLACEHOLDER"] = "0"  # the headless launcher needs it on CPU
        argv = self.net.exec(self.net.b, self._binary(), "serve", str(self.model), "--omni", *self._serve_args)
        argv += ["--stage-id", "0"]
        argv += ["--headless", "--omni-master-address", self.net.addr_a, "--omni-master-port", str(MASTER_PORT)]
        node = Node(f"remote{len(self.remotes)}", argv, env, self.workdir / f"remote{len(self.remotes)}.log")
        self.remotes.append(node)
        return node

    def wait_serving(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Until a request succeeds (the head is up and a remote replica attached)."""
        assert self.head is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.head.proc.poll() is not None:
                raise RuntimeError(f"the head exited with {self.head.proc.returncode}:\n{self.head.tail()}")
            try:
                if self.ask("a warm-up cat", timeout=30).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(1.0)
        remotes = "\n".join(f"--- {r.name}\n{r.tail(15)}" for r in self.remotes)
        raise RuntimeError(f"no answer within {timeout:g}s:\n--- head\n{self.head.tail(20)}\n{remotes}")

    def wait_replicas(self, count: int, timeout: float = STARTUP_TIMEOUT) -> None:
        """Until the head has attached `count` remote replicas since it started."""
        assert self.head is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.head.log()
            attached = ("Remote diffusion replica attached", "Remote LLM replica attached", "attached remote replica")
            if sum(log.count(line) for line in attached) >= count:
                return
            if self.head.proc.poll() is not None:
                raise RuntimeError(f"the head exited with {self.head.proc.returncode}:\n{self.head.tail()}")
            time.sleep(1.0)
        raise RuntimeError(f"{count} replicas were not attached within {timeout:g}s:\n{self.head.tail(20)}")

    # -- talking to the head ------------------------------------------------------------------------

    def in_a(self, fn: Callable[[], T]) -> T:
        """`fn()` on a thread inside the head's namespace."""
        return call_in(self.net.a, fn)

    def requests_sent(self) -> Counter[int]:
        """How many requests the head has sent each replica id (its stage clients log each one)."""
        assert self.head is not None
        return Counter(int(n) for n in re.findall(r"\[rep-(\d+)\] add request", self.head.log()))

    def in_b(self, fn: Callable[[], T]) -> T:
        """`fn()` on a thread inside the stage host's namespace."""
        return call_in(self.net.b, fn)

    def images(self, prompt: str, *, timeout: float = 60.0) -> httpx.Response:
        url = f"http://127.0.0.1:{HTTP_PORT}{IMAGES}"
        return self.in_a(lambda: httpx.post(url, json=image_body(prompt), timeout=timeout))

    def chat(self, prompt: str, *, timeout: float = 60.0) -> httpx.Response:
        url = f"http://127.0.0.1:{HTTP_PORT}/v1/chat/completions"
        return self.in_a(lambda: httpx.post(url, json=chat_body(prompt), timeout=timeout))

    def ask(self, prompt: str, *, timeout: float = 60.0) -> httpx.Response:
        """`prompt` to the deployment's stage: an image request, or a chat one for an LLM stage."""
        return (self.chat if self.llm else self.images)(prompt, timeout=timeout)

    def get(self, path: str, *, timeout: float = 60.0) -> httpx.Response:
        # A deadline, not a speed bound: the first /openapi.json builds every route's schema, which
        # took over 10 s on CI's loaded machine.
        return self.in_a(lambda: httpx.get(f"http://127.0.0.1:{HTTP_PORT}{path}", timeout=timeout))

    def in_flight(self, prompts: list[str], *, gap: float = 0.3, timeout: float = 120.0) -> list[Future[Any]]:
        """Send `prompts` `gap` seconds apart, all in flight together (returns once all are sent): a
        future per prompt, whose result is (the response or the exception, when it came, monotonic)."""

        def one(prompt: str) -> tuple[Any, float]:
            try:
                answer: Any = self.ask(prompt, timeout=timeout)
            except httpx.HTTPError as exc:
                answer = exc
            return answer, time.monotonic()

        futures = []
        for prompt in prompts:
            futures.append(self._pool.submit(one, prompt))
            time.sleep(gap)
        return futures

    # -- ending it --------------------------------------------------------------------------------

    def close(self) -> None:
        for node in [*self.remotes, *([self.head] if self.head else [])]:
            node.close()
        self._pool.shutdown(wait=True)  # each request has its timeout; the head is gone by now


def deployment(
    tmp_path_factory: pytest.TempPathFactory,
    tag: str,
    *,
    plugin: bool,
    head_keys: Path | None = None,
    stage_keys: Path | None = None,
    window: float | None = None,
    remotes: int = 1,
    llm: bool = False,
) -> Iterator[Deployment]:
    """A module fixture's namespaces and deployment (the head and `remotes` remote stages, started
    together, all attached); both are removed, with every process, however the module ends."""
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs these as root)")
    remove_stale()
    net = NetPair.create(tag)
    workdir = tmp_path_factory.mktemp(f"multinode-{tag}")
    dep = Deployment(workdir, net, plugin=plugin, head_keys=head_keys, stage_keys=stage_keys, window=window, llm=llm)
    try:
        dep.start_head()
        for _ in range(remotes):
            dep.start_remote()
        dep.wait_serving()
        dep.wait_replicas(remotes)
        yield dep
    finally:
        dep.close()
        left = net.destroy()
        assert not left, f"processes were still running in the namespaces: {left}"


def make_key_dirs(root: Path) -> tuple[Path, Path, Path]:
    """(head's, stage's, an outsider's) key directories, as an operator lays them out."""
    made = root / "made"
    for name in ("head", "stage0", "outsider"):
        keys.generate(made, name)
    head, stage, outsider = root / "head", root / "stage", root / "outsider"
    for directory, files in (
        (head, ("head.key_secret", "head.key", "stage0.key")),
        (stage, ("stage0.key_secret", "head.key")),
        (outsider, ("outsider.key_secret", "head.key")),
    ):
        directory.mkdir(mode=0o700)
        for name in files:
            (directory / name).write_bytes((made / name).read_bytes())
            (directory / name).chmod(0o600 if name.endswith("_secret") else 0o644)
    return head, stage, outsider
