"""How soon a receiving stage fails after its sender failed: vLLM-Omni 0.30 alone, then with the plugin.

Real parts only: vLLM-Omni's model-runner payload transport (its background save/recv threads)
and `SharedMemoryConnector`, a sender and a receiver in two forked processes, one POSIX shm
segment between them. The sender fails for real: its payload cannot be serialized, `put` fails,
the save thread retries and gives up; the moment it gives up (its error sink fires) is "sender
failed". The receiver is already waiting:

- sync: `recv_stage_payload` (what diffusion's `_maybe_recv_stage_payload` calls), 2 s retry window;
- poller: the async-chunk poller (`_poll_single_request` via the recv thread), watched for 2 s.

The baseline processes are forked before `register()`, so they run vLLM-Omni unpatched; the
plugin's are forked after it, in the same run.

Also measured: what the tombstone check costs an ordinary payload read, one
`SharedMemoryConnector.get` of a 4 KiB and of a 1 MiB tensor payload (the `put` before it is not
timed). The sides take turns round by round in one process, plugin on being the manifest's entries
for the connector modules applied (as `register()` applies them) and restored after, so a change
in the machine's load falls on every side alike; each figure is a side's median over all rounds,
and its fastest tenth (p10). A get's time is bimodal on a shared machine (vLLM-Omni's attach and
unlink each write to multiprocessing's resource tracker, another process), so the median moves
with the mix of the two modes, while p10 is the read itself. A second unpatched side ("off
again") says how far two identical sides differ in that run: its noise. Last, what the check adds
to one read apart from the decoding it is lost in: the plugin's `deserialize` around a no-op
decoder, less the no-op alone.

    .venv-omni/bin/python benches/connector_tombstones.py --repeat 5
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import importlib
import json
import multiprocessing
import os
import statistics
import time
import timeit
import uuid
from collections.abc import Iterator
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


#: payload name -> float32 elements of its one tensor
GET_SIZES = {"4KiB": 1024, "1MiB": 256 * 1024}
_WARM_GETS = 2  # untimed, each time a side begins


@contextlib.contextmanager
def _side(side: str) -> Iterator[None]:
    """Plugin "on": the manifest's entries for the connector modules applied (as `register()` applies
    them on import), restored on leaving. Every side enters through the same change to the patched
    classes (applied, and for an "off" side restored at once): Python's lookups re-warm after it, so
    a side that skipped it would look faster than one that did."""
    from omni_errors_vllm_omni.manifest import targets_by_module
    from omni_errors_vllm_omni.patching import apply, unapply

    for name, targets in targets_by_module().items():
        if name.startswith("vllm_omni.distributed.omni_connectors."):
            apply(importlib.import_module(name), targets)
    if side != "on":
        unapply()
    try:
        yield
    finally:
        unapply()


def _timed_gets(connector: Any, payload: Any, count: int) -> list[float]:
    """Seconds of each of `count` gets of `payload`, each put just before (outside the timing)."""
    times = []
    for i in range(count):
        key = f"bench-get-{os.getpid()}-{uuid.uuid4().hex[:8]}-{i}"
        connector.put("0", "1", key, payload)
        start = time.perf_counter()
        got = connector.get("0", "1", key)
        times.append(time.perf_counter() - start)
        if got is None:
            raise RuntimeError(f"the get of {key} found nothing")
    return times


def _check_ns(data: bytes, repeat: int = 20, number: int = 10_000) -> float:
    """Nanoseconds the plugin adds to one read of `data`: its `OmniSerde.deserialize` around a no-op
    instead of vLLM-Omni's decoder, less the no-op alone (best of `repeat` timings)."""
    import vllm_omni.distributed.omni_connectors.utils.serialization as serialization
    from omni_errors_vllm_omni.connectors import make_deserialize

    def decode(self: Any, data: Any, /) -> None:
        return None

    checked = make_deserialize(serialization, decode)
    best = {"off": float("inf"), "on": float("inf")}
    for _ in range(repeat):
        for side, call in (("off", decode), ("on", checked)):
            best[side] = min(best[side], timeit.timeit(functools.partial(call, None, data), number=number) / number)
    return (best["on"] - best["off"]) * 1e9


def _get_cost(rounds: int, per_round: int) -> dict[str, dict[str, float]]:
    """Per payload size: the median and p10 get, plugin off, on and off again, in rounds that rotate
    the order of the sides, and what the check itself adds to a read."""
    import torch

    runner = _runner(1)
    gc.disable()  # a collection's pause lands on whichever side allocated last, not on the plugin
    try:
        connector = runner._omni_connector
        results: dict[str, dict[str, float]] = {}
        for size, elements in GET_SIZES.items():
            payload = {"embed": torch.zeros(elements)}
            _timed_gets(connector, payload, per_round)  # warm-up: first-call costs on neither side
            # "off again" is a second baseline: how far two unpatched sides differ is the run's noise.
            sides = ("off", "on", "off again")
            samples: dict[str, list[float]] = {side: [] for side in sides}
            for i in range(rounds):
                for side in sides[i % 3 :] + sides[: i % 3]:
                    with _side("on" if side == "on" else "off"):
                        _timed_gets(connector, payload, _WARM_GETS)  # while the lookups re-warm
                        samples[side] += _timed_gets(connector, payload, per_round)
            off, on, again = (statistics.median(samples[side]) for side in sides)
            off10, on10, again10 = (statistics.quantiles(samples[side], n=10)[0] for side in sides)
            results[size] = {
                "plugin_off_median_us": round(off * 1e6, 1),
                "plugin_on_median_us": round(on * 1e6, 1),
                "on_vs_off_pct": round((on / off - 1) * 100, 2),
                "off_again_vs_off_pct": round((again / off - 1) * 100, 2),
                "plugin_off_p10_us": round(off10 * 1e6, 1),
                "plugin_on_p10_us": round(on10 * 1e6, 1),
                "on_vs_off_p10_pct": round((on10 / off10 - 1) * 100, 2),
                "off_again_vs_off_p10_pct": round((again10 / off10 - 1) * 100, 2),
                "check_ns_per_read": round(_check_ns(connector.serialize_obj(payload))),
            }
        return results
    finally:
        gc.enable()
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
    parser.add_argument("--get-rounds", type=int, default=200, help="alternating off/on rounds of gets (default 200)")
    parser.add_argument("--get-per-round", type=int, default=5, help="gets per size, side and round (default 5)")
    args = parser.parse_args()
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm_omni.distributed.omni_connectors.connectors.shm_connector  # noqa: F401
    import vllm_omni.distributed.omni_connectors.model_runner.omni_connector_payload_transport as transport
    from omni_errors_vllm_omni.patching import is_patched

    give_up = transport._OmniConnectorPayloadTransportMixin._requeue_or_drop_failed_send
    if is_patched(give_up):
        raise SystemExit("the plugin is already loaded: the baseline would not be vLLM-Omni alone")

    results: dict[str, Any] = {"shm_get": _get_cost(args.get_rounds, args.get_per_round)}
    for side in ("baseline (plugin off)", "plugin on"):
        if side == "plugin on":
            from omni_errors_vllm_omni import register

            register()
        results[side] = {mode: _summary([_trial(mode) for _ in range(args.repeat)]) for mode in ("sync", "poller")}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
