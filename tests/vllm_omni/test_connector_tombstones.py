"""Connector tombstones with the real `SharedMemoryConnector` and the real payload transport.

No server: two model-runner payload transports (vLLM-Omni's own mixin, with its background
recv/save threads) talk through real POSIX shared memory, in this process and across forked
processes. A sender fails for real (its payload cannot be serialized, so `put` fails, the save
thread retries and gives up). "Before" runs vLLM-Omni unpatched; "after" applies the manifest's
entries for the two connector modules (`patching.apply`, as `register()` does on import) and
restores the originals afterwards. Every wait has a deadline; no assertion is about elapsed time.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import time
import uuid
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from multiprocessing.shared_memory import SharedMemory
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from omni_errors import OmniErrorDetails, OmniServerError, encode
from omni_errors.carry import Tombstone, tombstone_from
from omni_errors.semantics.core_table import stage_failure_record
from omni_errors_vllm_omni.connectors import failed_requests, put_tombstone
from omni_errors_vllm_omni.manifest import targets_by_module
from omni_errors_vllm_omni.patching import apply, is_patched, unapply

DEADLINE_S = 60.0  # generous: the machine is shared; nothing here is a timing assertion
RETRY_S = 2.0  # vLLM-Omni's default `retry_seconds`


@pytest.fixture(scope="module")
def omni() -> SimpleNamespace:
    """The real modules, as vLLM-Omni ships them."""
    return real_modules()


def real_modules() -> SimpleNamespace:
    """The connector modules and a model runner class (also upstream_probe.py's probe, on either tree)."""
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    import vllm_omni.distributed.omni_connectors.connectors.base as base
    import vllm_omni.distributed.omni_connectors.connectors.shm_connector as shm_connector
    import vllm_omni.distributed.omni_connectors.model_runner.omni_connector_payload_transport as transport
    import vllm_omni.distributed.omni_connectors.utils.serialization as serialization
    from vllm_omni.worker.omni_connector_model_runner_mixin import OmniConnectorModelRunnerMixin

    return SimpleNamespace(
        base=base,
        serialization=serialization,
        shm=shm_connector,
        transport=transport,
        Runner=type("Runner", (OmniConnectorModelRunnerMixin,), {}),
    )


@pytest.fixture
def plugin(omni: SimpleNamespace) -> Iterator[None]:
    """The manifest's connector entries applied to the real modules; every original restored after."""
    modules = (omni.serialization, omni.transport)
    assert not any(is_patched(value) for value in patched_values(omni)), "the plugin is already on"
    try:
        for module in modules:
            apply(module, targets_by_module()[module.__name__])
        yield
    finally:
        unapply()


def patched_values(omni: SimpleNamespace) -> list[Any]:
    mixin = omni.transport._OmniConnectorPayloadTransportMixin
    return [
        omni.serialization.OmniSerde.serialize,
        omni.serialization.OmniSerde.deserialize,
        mixin.recv_stage_payload,
        mixin._recv_ordinary_stage_result,
        mixin._poll_single_request,
        mixin._requeue_or_drop_failed_send,
        mixin.cleanup_finished_request,
    ]


def make_runner(omni: SimpleNamespace, stage_id: int, *, async_chunk: bool = False) -> Any:
    runner = omni.Runner()
    runner.init_omni_connectors(
        SimpleNamespace(
            stage_id=stage_id,
            async_chunk=async_chunk,
            worker_type="ar",
            stage_connector_config={"name": "SharedMemoryConnector", "extra": {}},
        )
    )
    return runner


@pytest.fixture
def runners(omni: SimpleNamespace) -> Iterator[Callable[..., Any]]:
    """Makes transports; every one is shut down (threads joined, segments unlinked) on every path."""
    made: list[Any] = []

    def make(stage_id: int, **kwargs: Any) -> Any:
        made.append(make_runner(omni, stage_id, **kwargs))
        return made[-1]

    yield make
    for runner in made:
        runner.shutdown_omni_connectors()


@pytest.fixture
def req_id() -> Iterator[str]:
    """A request id of its own; whatever this test left under it in /dev/shm is removed and reported."""
    rid = f"tomb-{uuid.uuid4().hex[:12]}"
    yield rid
    left = sorted(Path("/dev/shm").glob(f"*{rid}*"))
    for path in left:
        path.unlink(missing_ok=True)
    assert not left, f"left in /dev/shm: {left}"


def wait_until(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {DEADLINE_S} s: {what}")
        time.sleep(0.005)


def tombstone_written(key: str) -> bool:
    """Whether the segment `key` holds a whole tombstone (read without consuming it) and its writer has
    let go of it: `SharedMemoryConnector.put` fills the segment while holding the key's lock file, and
    a `get` that finds that lock taken misses (returns None) and is retried, so a reader must not start
    before the put has released it."""
    try:
        segment = SharedMemory(name=key)
    except (FileNotFoundError, ValueError):  # not there yet, or not sized yet
        return False
    try:
        assert segment.buf is not None
        view = segment.buf[: segment.size]
        try:
            if tombstone_from(view) is None:
                return False
        finally:
            view.release()
    finally:
        segment.close()
    try:  # the lock `get` takes without waiting (shm_connector.py): free once `put` has let go
        with open(f"/dev/shm/shm_{key}_lockfile.lock", "rb+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(lock, fcntl.LOCK_UN)
    except (FileNotFoundError, BlockingIOError):
        return False
    return True


def unsendable() -> dict[str, Any]:
    """A payload `OmniSerializer` cannot encode: the real `put` fails, as a broken transfer does."""
    return {"embed": object()}


def _fail_and_wait(sender: Any, send: Callable[[], object]) -> None:
    """`send()` fails: returns once the sender gave up (its error sink fired)."""
    failed: list[BaseException] = []
    sender._connector_send_error_sink = failed.append
    send()
    wait_until(lambda: bool(failed), "the sender gives up")


def count_gets(runner: Any) -> list[int]:
    """Counts the receiver's connector reads (the real `get`, called through)."""
    connector = runner._omni_connector
    calls = [0]
    real_get = connector.get

    def get(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real_get(*args, **kwargs)

    connector.get = get
    return calls


# --- the manifest's entries patch exactly these attributes --------------------------------------


def test_the_manifest_entries_patch_the_connector_hooks(omni: SimpleNamespace, plugin: None) -> None:
    assert all(is_patched(value) for value in patched_values(omni))
    assert not is_patched(omni.shm.shm_read_bytes)  # the segment read stays vLLM-Omni's: one open per get


# --- telling a tombstone from a payload -------------------------------------------------------


def sender_record(request_id: str | None = None) -> OmniErrorDetails:
    return OmniErrorDetails(
        "talker failed", "server", 503, "ServiceUnavailableError", request_id=request_id, stage_id=0
    )


def test_a_frame_is_a_tombstone_and_a_payload_is_not(plugin: None, omni: SimpleNamespace) -> None:
    frame = encode(sender_record("r1"))
    assert tombstone_from(frame) == Tombstone(sender_record("r1"))
    assert tombstone_from(bytearray(frame)) == Tombstone(sender_record("r1"))
    serialize = omni.base.OmniConnectorBase.serialize_obj
    # msgpack payloads, including the one document that starts with the magic byte: the int 79
    for payload in ({"a": 1}, 79, b"OE" + bytes(30), "OE" * 20, [79, 69]):
        assert tombstone_from(serialize(payload)) is None
        assert omni.base.OmniConnectorBase.deserialize_obj(serialize(payload)) == payload
    assert tombstone_from(frame + b"\x00") is None  # the header states the exact length


def test_the_core_tombstone_of_a_give_up_its_frame_and_its_error() -> None:
    """What the plugin's wraps and vLLM-Omni's own transport (the upstream series) both call."""
    assert Tombstone(sender_record()).frame() == encode(sender_record())
    assert Tombstone.of(None, request_id="r1", stage_id=0) == Tombstone(
        stage_failure_record(stage_id=0, request_id="r1")
    )
    given_up = Tombstone.of(RuntimeError("put failed for /home/alice/x"), request_id="r1", stage_id=2).details
    assert (given_up.status_code, given_up.request_id, given_up.stage_id, given_up.fatal) == (500, "r1", 2, False)
    error = Tombstone(sender_record()).error(request_id="r9")
    assert isinstance(error, OmniServerError) and error.details == sender_record("r9")
    assert Tombstone(sender_record("r1")).error(request_id="r9").details.request_id == "r1"  # the sender's id is kept


def test_a_torn_frame_is_still_a_failed_sender_with_its_stage(omni: SimpleNamespace) -> None:
    torn = bytearray(encode(sender_record()))
    torn[20] ^= 0xFF  # inside the message: the checksum no longer matches
    tombstone = tombstone_from(bytes(torn))
    assert tombstone is not None
    assert (tombstone.details.status_code, tombstone.details.stage_id) == (500, 0)


def test_shm_tombstone_is_read_as_a_payload_is_and_the_segment_removed(
    plugin: None, omni: SimpleNamespace, runners: Callable[..., Any], req_id: str
) -> None:
    connector = runners(1)._omni_connector
    key = f"{req_id}_0_0"
    assert put_tombstone(connector, "0", "1", key, sender_record(req_id))
    segment = SharedMemory(name=key)
    try:  # the segment holds the bare frame: what a reader without the plugin finds there too
        assert segment.buf is not None and bytes(segment.buf[: segment.size]) == encode(sender_record(req_id))
    finally:
        segment.close()
    got = connector.get("0", "1", key)  # vLLM-Omni's own read (one open, copy, unlink), then `deserialize`
    assert got is not None and got[0] == Tombstone(sender_record(req_id))
    assert not Path(f"/dev/shm/{key}").exists()


def test_shm_real_payloads_are_unchanged(
    plugin: None, omni: SimpleNamespace, runners: Callable[..., Any], req_id: str
) -> None:
    import torch

    connector = runners(1)._omni_connector
    for chunk, payload in enumerate(({"embed": torch.arange(6.0).reshape(2, 3)}, 79)):
        key = f"{req_id}_0_{chunk}"
        assert connector.put("0", "1", key, payload)[0]
        got = connector.get("0", "1", key)
        assert got is not None
        if isinstance(payload, dict):
            assert torch.equal(got[0]["embed"], payload["embed"])
        else:
            assert got[0] == payload


# --- the sync receiver (`recv_stage_payload`, behind `_maybe_recv_stage_payload`) --------------


def test_before_sync_receiver_waits_out_retry_seconds_and_gets_nothing(
    omni: SimpleNamespace, runners: Callable[..., Any], req_id: str
) -> None:
    """vLLM-Omni's own give-up: the receiver's deadline passes, it returns None ("unavailable")."""
    sender, receiver = runners(0), runners(1)
    _fail_and_wait(sender, lambda: sender.send_full_payload_outputs(None, {req_id: unsendable()}))
    gets = count_gets(receiver)
    assert receiver.recv_stage_payload(req_id, "0", "1", retry_seconds=RETRY_S) is None
    assert gets[0] > 1  # it kept polling an empty key until its deadline


def test_after_sync_receiver_raises_the_senders_record(
    plugin: None, omni: SimpleNamespace, runners: Callable[..., Any], req_id: str
) -> None:
    sender, receiver = runners(0), runners(1)
    sender.send_full_payload_outputs(None, {req_id: unsendable()})
    wait_until(lambda: tombstone_written(f"{req_id}_0_0"), "the sender puts its tombstone")
    gets = count_gets(receiver)
    with pytest.raises(OmniServerError) as raised:
        receiver.recv_stage_payload(req_id, "0", "1", retry_seconds=DEADLINE_S)
    details = raised.value.details
    assert (details.category, details.status_code, details.stage_id, details.request_id) == ("server", 500, 0, req_id)
    assert gets[0] == 1  # the first read found the tombstone: no retry loop
    assert "/dev/shm" not in details.message


def _diffusion_receiver(omni: SimpleNamespace) -> Any:
    """vLLM-Omni's diffusion payload receiver, borrowing a real SHM connector as its KV manager's."""
    from vllm_omni.diffusion.worker.stage_payload import DiffusionStagePayloadMixin

    runner = type("DiffusionRunner", (DiffusionStagePayloadMixin,), {})()
    runner.od_config = SimpleNamespace(stage_id=1, stage_input_payload_keys=("embed",))
    manager = SimpleNamespace(connector=omni.shm.SharedMemoryConnector({"stage_id": 1}), recv_stages=("0", "1"))
    runner.init_omni_connectors(SimpleNamespace(stage_id=1), manager, synchronous=True)
    return runner


def _diffusion_request(req_id: str) -> SimpleNamespace:
    return SimpleNamespace(request_id=req_id, external_req_id=None, prompt={"prompt": "a cat"}, kv_sender_info=None)


def test_before_diffusion_receiver_fails_as_payload_unavailable(
    omni: SimpleNamespace, runners: Callable[..., Any], req_id: str
) -> None:
    sender, receiver = runners(0), _diffusion_receiver(omni)
    _fail_and_wait(sender, lambda: sender.send_full_payload_outputs(None, {req_id: unsendable()}))
    with pytest.raises(RuntimeError, match="Stage payload unavailable") as raised:
        receiver._maybe_recv_stage_payload(_diffusion_request(req_id))
    assert not isinstance(raised.value, OmniServerError)  # a generic text, no record


def test_after_diffusion_receiver_raises_the_senders_record(
    plugin: None, omni: SimpleNamespace, runners: Callable[..., Any], req_id: str
) -> None:
    sender, receiver = runners(0), _diffusion_receiver(omni)
    sender.send_full_payload_outputs(None, {req_id: unsendable()})
    wait_until(lambda: tombstone_written(f"{req_id}_0_0"), "the sender puts its tombstone")
    with pytest.raises(OmniServerError) as raised:
        receiver._maybe_recv_stage_payload(_diffusion_request(req_id))
    assert (raised.value.details.stage_id, raised.value.details.request_id) == (0, req_id)


# --- the async poller (`_poll_single_request`, full payload and async chunk) -------------------


def send_failing(sender: Any, req_id: str, async_chunk: bool) -> None:
    if async_chunk:
        sender._enqueue_chunk_payload(SimpleNamespace(request_id=req_id, external_req_id=None), unsendable())
    else:
        sender.send_full_payload_outputs(None, {req_id: unsendable()})


@pytest.mark.parametrize("async_chunk", [False, True], ids=["full-payload", "async-chunk"])
def test_before_poller_keeps_waiting_after_the_sender_gave_up(
    omni: SimpleNamespace, runners: Callable[..., Any], req_id: str, async_chunk: bool
) -> None:
    sender, receiver = runners(0, async_chunk=async_chunk), runners(1, async_chunk=async_chunk)
    gets = count_gets(receiver)
    receiver.register_chunk_recv(SimpleNamespace(request_id=req_id, external_req_id=None))
    _fail_and_wait(sender, lambda: send_failing(sender, req_id, async_chunk))
    seen = gets[0]
    wait_until(lambda: gets[0] > seen + 20, "the poller polls again")
    assert req_id in receiver._pending_load_reqs  # still waiting: only an abort ends it
    assert req_id not in failed_requests(receiver)


@pytest.mark.parametrize("async_chunk", [False, True], ids=["full-payload", "async-chunk"])
def test_after_poller_fails_the_request_with_the_senders_record(
    plugin: None, omni: SimpleNamespace, runners: Callable[..., Any], req_id: str, async_chunk: bool
) -> None:
    sender, receiver = runners(0, async_chunk=async_chunk), runners(1, async_chunk=async_chunk)
    receiver.register_chunk_recv(SimpleNamespace(request_id=req_id, external_req_id=None))
    send_failing(sender, req_id, async_chunk)
    wait_until(lambda: req_id in failed_requests(receiver), "the poller fails the request")
    details = failed_requests(receiver)[req_id]
    assert (details.status_code, details.stage_id, details.request_id) == (500, 0, req_id)
    assert req_id not in receiver._pending_load_reqs
    assert req_id not in receiver._local_stage_payload_cache  # the tombstone is not a payload
    receiver.cleanup_finished_request(req_id)
    assert req_id not in failed_requests(receiver)


# --- across processes: a forked sender and receiver, one segment between them -----------------


def _receive(omni: SimpleNamespace, req_id: str, ready: Connection, report: Connection) -> None:
    receiver = make_runner(omni, 1)
    try:
        ready.send(True)
        try:
            receiver.recv_stage_payload(req_id, "0", "1", retry_seconds=DEADLINE_S)
            report.send(None)
        except OmniServerError as error:
            report.send(encode(error.details))
    finally:
        receiver.shutdown_omni_connectors()


def _fail_sending(omni: SimpleNamespace, req_id: str, report: Connection, stop: Connection) -> None:
    sender = make_runner(omni, 0)
    try:
        failed: list[BaseException] = []
        sender._connector_send_error_sink = failed.append
        sender.send_full_payload_outputs(None, {req_id: unsendable()})
        wait_until(lambda: bool(failed), "the sender gives up")
        report.send(True)
        stop.poll(DEADLINE_S)  # closing the connector unlinks what it put and nobody read yet
    finally:
        sender.shutdown_omni_connectors()


def _join(process: Any) -> None:
    process.join(DEADLINE_S)
    if process.is_alive():
        process.kill()
        process.join(DEADLINE_S)
        raise AssertionError(f"{process.name} did not end within {DEADLINE_S} s")


def test_a_sender_process_fails_a_waiting_receiver_process(plugin: None, omni: SimpleNamespace, req_id: str) -> None:
    fork = multiprocessing.get_context("fork")  # the children inherit the imported, patched modules
    ready_r, ready_w = fork.Pipe(duplex=False)
    got_r, got_w = fork.Pipe(duplex=False)
    sent_r, sent_w = fork.Pipe(duplex=False)
    stop_r, stop_w = fork.Pipe(duplex=False)
    receiver = fork.Process(target=_receive, args=(omni, req_id, ready_w, got_w), name="receiver")
    sender = fork.Process(target=_fail_sending, args=(omni, req_id, sent_w, stop_r), name="sender")
    receiver.start()
    try:
        assert ready_r.poll(DEADLINE_S) and ready_r.recv()
        sender.start()
        try:
            assert sent_r.poll(DEADLINE_S) and sent_r.recv()
            assert got_r.poll(DEADLINE_S)
            frame = got_r.recv()
        finally:
            stop_w.send(True)
            _join(sender)
    finally:
        _join(receiver)
    assert isinstance(frame, bytes)
    details = tombstone_from(frame)
    assert details is not None and (details.details.stage_id, details.details.request_id) == (0, req_id)
    assert (receiver.exitcode, sender.exitcode) == (0, 0)
