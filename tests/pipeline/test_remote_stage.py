"""`omni-errors serve` on one host and `omni-errors stage code2wav` on another (two network
namespaces, a veth pair, CURVE): the remote stage serves like a local one, `/health` and
`omni_errors_total` count it like a local one, and its SIGKILL ends the server (exit 86) after
every stream got its terminal error. Needs root; CI runs as root, so these tests never skip there.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from netns import NetPair, call_in, remove_stale
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.security import keys
from omni_errors_tools.chaos.loadgen import Outcome, sse_call

STARTUP = 300.0
PORT, LINK_PORT = 8000, 5570  # inside the server host's namespace, nothing else is listening
CHAT = "/v1/chat/completions"


@dataclass
class TwoHosts:
    net: NetPair
    serve: subprocess.Popen[bytes]
    stage: subprocess.Popen[bytes]
    logs: Path

    def get(self, path: str) -> httpx.Response:
        return call_in(self.net.a, lambda: httpx.get(f"http://127.0.0.1:{PORT}{path}", timeout=30))

    def post(self, path: str, body: dict[str, Any], headers: dict[str, str] | None = None) -> httpx.Response:
        url = f"http://127.0.0.1:{PORT}{path}"
        return call_in(self.net.a, lambda: httpx.post(url, json=body, headers=headers, timeout=60))


def _chat(**kw: Any) -> dict[str, Any]:
    return {"model": "omni-tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, **kw}


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoHosts]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs these as root)")
    remove_stale()
    net = NetPair.create("p")
    logs = tmp_path_factory.mktemp("two-hosts")
    k = logs / "keys"
    keys.generate(k, "serve")
    keys.generate(k, "code2wav")
    link = f"tcp://{net.addr_a}:{LINK_PORT}"
    py = [sys.executable, "-m", "omni_errors_cli"]
    with open(logs / "serve.log", "wb") as out:
        serve = subprocess.Popen(
            net.exec(net.a, *py, "serve", "--port", str(PORT), "--step-interval", "0.02", "--allow-request-faults",
                     "--remote-stage", "code2wav", "--link-bind", link, "--link-key", str(k / "serve.key_secret"),
                     "--link-allow", str(k / "code2wav.key")),
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    with open(logs / "stage.log", "wb") as out:
        stage = subprocess.Popen(
            net.exec(net.b, *py, "stage", "code2wav", "--connect", link, "--key", str(k / "code2wav.key_secret"),
                     "--server-key", str(k / "serve.key")),
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    two = TwoHosts(net, serve, stage, logs)
    try:
        deadline = time.monotonic() + STARTUP
        while time.monotonic() < deadline and serve.poll() is None:
            try:
                if two.get("/health").status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        else:
            raise RuntimeError(f"serve did not start: {(logs / 'serve.log').read_text()[-3000:]}")
        yield two
    finally:
        for proc in (serve, stage):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in (serve, stage):
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        left = net.destroy()
        assert not left, f"processes left in the namespaces: {left}"


def test_remote_stage_serves_and_health_counts_it(hosts: TwoHosts) -> None:
    assert hosts.get("/health").json() == {"status": "ok"}
    r = hosts.post(CHAT, _chat(modalities=["text", "audio"]))
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["audio"]["data"]  # code2wav ran on the other host


def test_remote_stage_error_is_rendered_and_counted(hosts: TwoHosts) -> None:
    r = hosts.post(CHAT, _chat(modalities=["text", "audio"]), {"X-Omni-Fault": "stage_error;stage=2"})
    assert r.status_code == 500 and r.json()["error"]["stage_id"] == 2
    metrics = hosts.get("/metrics").text
    assert 'omni_errors_total{category="server",error_type="InternalServerError",fatal="false",stage_id="2"' in metrics
    assert hosts.get("/health").status_code == 200  # a per-request failure: the pipeline keeps serving


def test_remote_sigkill_answers_every_stream_then_exits_86(hosts: TwoHosts) -> None:
    async def streams() -> list[Outcome]:
        body = _chat(stream=True, modalities=["text", "audio"], max_tokens=256)
        return list(await asyncio.gather(*(sse_call("127.0.0.1", PORT, CHAT, {**body, "seed": i}) for i in range(20))))

    def load() -> list[Outcome]:
        return asyncio.run(streams())

    import threading

    outcomes: list[Outcome] = []
    runner = threading.Thread(target=lambda: outcomes.extend(call_in(hosts.net.a, load)))
    runner.start()
    time.sleep(2.0)  # the streams are flowing through code2wav on the other host
    t_kill = time.monotonic()
    hosts.stage.send_signal(signal.SIGKILL)
    runner.join(120)
    code = hosts.serve.wait(60)
    print(f"\n[two hosts] remote SIGKILL -> server exited {time.monotonic() - t_kill:.3f}s")
    assert len(outcomes) == 20
    assert all(o.result in ("ok", "error") for o in outcomes), [o.result for o in outcomes]  # none lost or hung
    errors = [o for o in outcomes if o.result == "error"]
    # In flight at code2wav: the canonical fatal 500. Finished by the talker in the second before the
    # loss was declared: 503 (the connection was already gone, the request was never handed over).
    assert errors and all((o.status, o.stage_id) in ((500, 2), (503, 2)) for o in errors)
    assert all(o.message == "Stage 2 is unreachable; retry later" for o in errors if o.status == 503)
    assert code == int(ExitCode.LINK_LOST), (hosts.logs / "serve.log").read_text()[-3000:]
    assert hosts.stage.wait(10) == -signal.SIGKILL
