"""Process-free checks of the lifecycle's parts: signals, status board, framing, exit-code table."""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import struct
from pathlib import Path

import omni_errors
import pytest
from omni_errors.lifecycle import ExitCode
from omni_errors.lifecycle.channels import _SLOT_SIZE, FrameReader, Kind, StatusBoard, pack
from omni_errors.lifecycle.failures import lifecycle_error
from omni_errors.lifecycle.signals import AsyncSignalHandlers, SignalLatch

DOC = Path(__file__).parents[2] / "docs" / "lifecycle.md"


def test_exit_code_table_is_documented() -> None:
    rows = dict(re.findall(r"^\| (\d+) \| `(\w+)` \|", DOC.read_text(), re.M))
    assert {int(k): v for k, v in rows.items()} == {int(c): c.name for c in ExitCode}


def test_async_handlers_pass_every_signal_to_one_entry_point() -> None:
    calls: list[int] = []

    async def main() -> None:
        handlers = AsyncSignalHandlers(asyncio.get_running_loop(), calls.append)
        handlers.install()
        try:
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(0.05)
            os.kill(os.getpid(), signal.SIGTERM)
            await asyncio.sleep(0.05)
        finally:
            handlers.remove()

    asyncio.run(main())
    assert calls == [signal.SIGINT, signal.SIGTERM]


def test_worker_latch_records_and_wakes_then_second_sigint_raises() -> None:
    latch = SignalLatch()
    latch.install()
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert latch.signum == signal.SIGTERM
        assert select.select([latch.wake_fd], [], [], 1.0)[0] == [latch.wake_fd]
        latch.drain()
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            signal.sigtimedwait([], 0)  # a bytecode boundary for the handler to run
    finally:
        latch.close()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_status_board_heartbeat_last_words_and_unlink(shm_prefix: str) -> None:
    board = StatusBoard.create(2, shm_prefix)
    try:
        other = StatusBoard.attach(board.name, 2)
        details = lifecycle_error("dead", "x", stage_id=1)
        other.beat(1, 12345)
        other.write_last_words(1, details)
        other.close()
        assert board.last_beat(1) == 12345 and board.last_beat(0) == 0
        assert board.read_last_words(1) == details
        assert board.read_last_words(0) is None
        # a torn frame (the stage died while writing) is ignored, not decoded
        struct.pack_into("<B", board._buf, _SLOT_SIZE + 16 + 20, 0xFF)
        assert board.read_last_words(1) is None
    finally:
        board.unlink()
    assert not Path("/dev/shm", board.name).exists()


def test_frame_reader_reassembles_and_rejects_bad_lengths() -> None:
    got: list[tuple[int, bytes]] = []
    closed: list[BaseException | None] = []
    reader = FrameReader(lambda k, b: got.append((k, bytes(b))), closed.append)
    frame = omni_errors.encode(lifecycle_error("timeout", "slow", stage_id=0))
    msgs = [pack(Kind.REQUEST_ERROR, frame), pack(Kind.READY)]
    stream = b"".join(len(m).to_bytes(4, "big") + m for m in msgs)
    for i in range(0, len(stream), 7):  # arbitrary chunking
        reader.data_received(stream[i : i + 7])
    assert got == [(Kind.REQUEST_ERROR, frame), (Kind.READY, b"")]
    assert omni_errors.decode(got[0][1]).status_code == 504
    reader.data_received((-5).to_bytes(4, "big", signed=True))
    assert len(closed) == 1 and isinstance(closed[0], ValueError)
