"""Records across real process boundaries: POSIX shared memory, vLLM's MessageQueue,
multiprocessing queues, ZMQ frames and msgpack/msgspec messages."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from multiprocessing import shared_memory
from typing import Any

import msgpack
import msgspec
import omni_errors as oe
import procs
import pytest
import zmq
from omni_errors import OmniErrorDetails, embed

SPAWN = mp.get_context("spawn")
RECORDS = [
    OmniErrorDetails("stage 2 is dead", "server", 500, "EngineDeadError", request_id="r-1", stage_id=2, fatal=True),
    OmniErrorDetails("top_p must be in (0, 1], got 1.5.", "client", 400, "BadRequestError", parameter="top_p"),
]


def _join(proc: Any) -> None:
    # A spawned child imports vLLM for the MessageQueue case (15-60 s here); at load 13 on 2 cores
    # 60 s was not enough once. Generous: this checks the records, not the time.
    proc.join(timeout=300)
    if proc.is_alive():
        proc.kill()
        proc.join(timeout=10)
    assert proc.exitcode == 0


@pytest.fixture
def segment() -> Iterator[shared_memory.SharedMemory]:
    shm = shared_memory.SharedMemory(create=True, size=4096)
    try:
        yield shm
    finally:
        shm.close()
        shm.unlink()


def test_frame_written_into_shm_is_decoded_by_another_process(segment: shared_memory.SharedMemory) -> None:
    written = oe.encode_into(RECORDS[0], segment.buf, 0)
    parent, child = SPAWN.Pipe(duplex=False)
    proc = SPAWN.Process(target=procs.read_frame_from_shm, args=(segment.name, written, child))
    proc.start()
    try:
        assert parent.poll(60), "child sent nothing"
        assert parent.recv() == RECORDS[0].to_dict()
    finally:
        _join(proc)


def test_records_through_multiprocessing_queues() -> None:
    inbox, outbox = SPAWN.Queue(), SPAWN.Queue()
    proc = SPAWN.Process(target=procs.echo_queue, args=(inbox, outbox))
    proc.start()
    try:
        inbox.put(RECORDS)
        assert outbox.get(timeout=60) == RECORDS
    finally:
        _join(proc)
        inbox.close()
        outbox.close()


def test_records_through_vllm_shm_message_queue() -> None:
    from vllm.distributed.device_communicators.shm_broadcast import MessageQueue

    queue = MessageQueue(n_reader=1, n_local_reader=1)
    parent, child = SPAWN.Pipe(duplex=False)
    proc = SPAWN.Process(target=procs.read_message_queue, args=(queue.export_handle(), child))
    proc.start()
    try:
        queue.wait_until_ready()
        queue.enqueue(RECORDS, timeout=60)
        assert parent.poll(120), "reader sent nothing"
        assert parent.recv() == [d.to_dict() for d in RECORDS]
    finally:
        _join(proc)
        queue.shutdown()
        del queue


def test_frame_over_zmq_decoded_from_the_zmq_frame() -> None:
    ctx = zmq.Context.instance()
    push, pull = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        push.bind("inproc://omni-errors-codec")
        pull.connect("inproc://omni-errors-codec")
        push.send(oe.encode(RECORDS[1]), copy=False)
        assert pull.poll(10_000)
        frame = pull.recv(copy=False)
        assert oe.decode(frame.buffer) == RECORDS[1]
    finally:
        push.close(linger=0)
        pull.close(linger=0)


def test_record_inside_a_msgpack_dict() -> None:
    message = {"type": "error", "request_id": "r-1", "details": RECORDS[0]}
    packed = msgpack.packb(message, default=embed.default)
    assert msgpack.unpackb(packed, ext_hook=embed.ext_hook) == message
    as_bin = msgpack.packb({"type": "error", "details": oe.encode(RECORDS[1])})
    assert oe.decode(msgpack.unpackb(as_bin)["details"]) == RECORDS[1]


def test_record_inside_a_msgspec_message() -> None:
    encoder = msgspec.msgpack.Encoder(enc_hook=embed.enc_hook)
    decoder = msgspec.msgpack.Decoder(ext_hook=embed.msgspec_ext_hook)
    assert decoder.decode(encoder.encode({"errors": RECORDS})) == {"errors": RECORDS}


def test_foreign_ext_codes_pass_through() -> None:
    packed = msgpack.packb(msgpack.ExtType(2, b"vllm"))
    assert msgpack.unpackb(packed, ext_hook=embed.ext_hook) == msgpack.ExtType(2, b"vllm")
    with pytest.raises(TypeError):
        msgpack.packb(object(), default=embed.default)
