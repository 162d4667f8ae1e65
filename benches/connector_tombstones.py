"""How soon a receiving stage fails after its sender failed: vLLM-Omni 0.30 alone, then with the plugin.

Real parts only: vLLM-Omni's model-runner payload transport (its background save/recv threads)
and `SharedMemoryConnector`, a sender and a receiver in two forked processes, one POSIX shm
segment between them. The sender fails for real: its payload cannot be serialized, `put` fails,
the save thread retries and gives up; the moment it gives up (its error sink fires) is "sender
failed". The receiver is already waiting:

- sync: `recv_stage_payload` (what diffusion's `_maybe_recv_stage_payload` calls), 2 s retry window;
- poller: the async-chunk poller (`_poll_single_request` via the recv thread), watched for 2 s.

The baseline processes are forked before `register()`, so they run vLLM-Omni unpatched; the
plugin's are forked after it, in the same run. Also measured: what the tombstone check costs an
ordinary SHM payload read (one `get` of a 1 MiB payload, before and after `register()`).

    .venv-omni/bin/python benches/connector_tombstones.py --repeat 5
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import time
import uuid
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

RETRY_S = 2.0  # vLLM-Omni's default `retry_seconds`; the poller is watched as long
DEADLINE_S = 120.0  # a child that has not answered by then is a failed run, not a slow one


def _runner(stage_id: int) -> Any:
    from vllm_omni.worker.omni_connector_model_runner_mixin import OmniConnectorModelRunnerMixin

    runner = type("Runner", (OmniConnectorModelRunnerMixin,), {})()
    runner.init_omni_connectors(
        SimpleNamespace(
            stage_id=stage_id,
            async_chunk=False,
            worker_type="ar",
            stage_connector_config={"name": "SharedMemoryConnector", "extra": {}},
        )
    )
    return runner


def _sender(req_id: str, go: Connection, report: Connection, stop: Connection) -> None:
    runner = _runner(0)
    failed_at: list[float] = []
    runner._connector_send_error_sink = lambda _error: failed_at.append(time.monotonic())
    try:
        report.send("ready")
        go.recv()
        runner.send_full_payload_outputs(None, {req_id: {"embed": object()}})
        deadline = time.monotonic() + DEADLINE_S
        while not failed_at and time.monotonic() < deadline:
            time.sleep(0.001)
        report.send(failed_at[0] if failed_at else None)
        stop.poll(DEADLINE_S)  # closing the connector unlinks what it put and nobody read yet
    finally:
        runner.shutdown_omni_connectors()


def _receiver(req_id: str, mode: str, go: Connection, report: Connection) -> None:
    runner = _runner(1)
    try:
        report.send("ready")
        go.recv()
        started = time.monotonic()
        if mode == "sync":
            try:
                payload = runner.recv_stage_payload(req_id, "0", "1", retry_seconds=RETRY_S)
                outcome = "None: Stage payload unavailable" if payload is None else "payload"
            except Exception as error:  # the plugin's rebuilt record
                details = getattr(error, "details", None)
                outcome = f"{type(error).__name__} {getattr(details, 'status_code', '')} stage {details.stage_id}"
            report.send((started, time.monotonic(), outcome))
            return
        runner.register_chunk_recv(SimpleNamespace(request_id=req_id, external_req_id=None))
        failures = runner.__dict__
        while time.monotonic() - started < RETRY_S:
            found = failures.get("omni_errors_failed_requests", {}).get(req_id)
            if found is not None:
                report.send((started, time.monotonic(), f"failed {found.status_code} stage {found.stage_id}"))
                return
            time.sleep(0.001)
        still = req_id in runner._pending_load_reqs
        report.send((started, None, "still waiting" if still else "left the poller"))
    finally:
        runner.shutdown_omni_connectors()


def _trial(mode: str) -> dict[str, Any]:
    fork = multiprocessing.get_context("fork")
    req_id = f"bench-{uuid.uuid4().hex[:12]}"
    pipes = {name: fork.Pipe(duplex=False) for name in ("go_s", "go_r", "rep_s", "rep_r", "stop")}
    sender = fork.Process(target=_sender, args=(req_id, pipes["go_s"][0], pipes["rep_s"][1], pipes["stop"][0]))
    receiver = fork.Process(target=_receiver, args=(req_id, mode, pipes["go_r"][0], pipes["rep_r"][1]))
    sender.start()
    receiver.start()
    try:
        for name in ("rep_s", "rep_r"):
            if not pipes[name][0].poll(DEADLINE_S) or pipes[name][0].recv() != "ready":
                raise RuntimeError("a child did not get ready")
        pipes["go_r"][1].send("go")
        time.sleep(0.1)  # the receiver is waiting before the sender fails
        pipes["go_s"][1].send("go")
        if not (pipes["rep_s"][0].poll(DEADLINE_S) and pipes["rep_r"][0].poll(DEADLINE_S)):
            raise RuntimeError("a child did not answer")
        failed_at = pipes["rep_s"][0].recv()
        started, done, outcome = pipes["rep_r"][0].recv()
    finally:
        pipes["stop"][1].send("stop")
        for process in (sender, receiver):
            process.join(DEADLINE_S)
            if process.is_alive():
                process.kill()
                process.join()
    return {
        "after_sender_failed_s": None if done is None else done - failed_at,
        "receiver_waited_s": None if done is None else done - started,
        "outcome": outcome,
    }


def _get_cost(repeat: int) -> float:
    """Median seconds of one `SharedMemoryConnector.get` of a 1 MiB payload (put outside the timing)."""
    import torch

    runner = _runner(1)
    try:
        connector = runner._omni_connector
        payload = {"embed": torch.zeros(256 * 1024)}
        times = []
        for i in range(repeat):
            key = f"bench-get-{os.getpid()}-{i}"
            connector.put("0", "1", key, payload)
            start = time.perf_counter()
            connector.get("0", "1", key)
            times.append(time.perf_counter() - start)
        return statistics.median(times)
    finally:
        runner.shutdown_omni_connectors()


def _summary(trials: list[dict[str, Any]]) -> dict[str, Any]:
    latencies = [t["after_sender_failed_s"] for t in trials if t["after_sender_failed_s"] is not None]
    return {
        "median_after_sender_failed_s": statistics.median(latencies) if latencies else None,
        "max_after_sender_failed_s": max(latencies) if latencies else None,
        "answered": f"{len(latencies)}/{len(trials)}",
        "outcomes": sorted({t["outcome"] for t in trials}),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="trials per mode and side (default 5)")
    parser.add_argument("--get-repeat", type=int, default=200, help="SHM gets timed per side (default 200)")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm_omni.distributed.omni_connectors.connectors.shm_connector  # noqa: F401
    import vllm_omni.distributed.omni_connectors.model_runner.omni_connector_payload_transport as transport
    from omni_errors.vllm_omni.patching import is_patched

    give_up = transport._OmniConnectorPayloadTransportMixin._requeue_or_drop_failed_send
    if is_patched(give_up):
        raise SystemExit("the plugin is already loaded: the baseline would not be vLLM-Omni alone")

    results: dict[str, Any] = {}
    for side in ("baseline (plugin off)", "plugin on"):
        if side == "plugin on":
            from omni_errors.vllm_omni import register

            register()
        results[side] = {mode: _summary([_trial(mode) for _ in range(args.repeat)]) for mode in ("sync", "poller")}
        results[side]["shm_get_1MiB_median_us"] = round(_get_cost(args.get_repeat) * 1e6, 1)
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
