"""Process-free checks of the lifecycle's parts: signals, status board, framing, exit-code table."""

from __future__ import annotations

import asyncio
import os
import select
import signal
import struct
from multiprocessing import shared_memory
from pathlib import Path
from typing import Any

import omni_errors
import pytest
from omni_errors.semantics.core_table import DEAD_MESSAGE, fatal_record, timeout_record, unavailable_record
from omni_errors_tools.lifecycle import StageRequestError, StageSpec, Supervisor
from omni_errors_tools.lifecycle.channels import SLOT_SIZE, FrameReader, Kind, StatusBoard, pack
from omni_errors_tools.lifecycle.requests import Requests
from omni_errors_tools.lifecycle.signals import AsyncSignalHandlers, SignalLatch
from omni_errors_tools.lifecycle.state import State, transition
from omni_errors_tools.lifecycle.stopping import StopPlan


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
        details = fatal_record(stage_id=1)
        other.beat(1, 12345)
        other.write_last_words(1, details)
        other.close()
        assert board.last_beat(1) == 12345 and board.last_beat(0) == 0
        assert board.read_last_words(1) == details
        assert board.read_last_words(0) is None
        # a torn frame (the stage died while writing) is ignored, not decoded
        raw = shared_memory.SharedMemory(name=board.name)
        try:
            struct.pack_into("<B", raw.buf, SLOT_SIZE + 16 + 20, 0xFF)  # slot 1: 16-byte header, then the frame
        finally:
            raw.close()
        assert board.read_last_words(1) is None
    finally:
        board.unlink()
    assert not Path("/dev/shm", board.name).exists()


def test_frame_reader_reassembles_and_rejects_bad_lengths() -> None:
    got: list[tuple[int, bytes]] = []
    closed: list[BaseException | None] = []
    reader = FrameReader(lambda k, b: got.append((k, bytes(b))), closed.append)
    frame = omni_errors.encode(timeout_record("slow", stage_id=0))
    msgs = [pack(Kind.REQUEST_ERROR, frame), pack(Kind.READY)]
    stream = b"".join(len(m).to_bytes(4, "big") + m for m in msgs)
    for i in range(0, len(stream), 7):  # arbitrary chunking
        reader.data_received(stream[i : i + 7])
    assert got == [(Kind.REQUEST_ERROR, frame), (Kind.READY, b"")]
    assert omni_errors.decode(got[0][1]).status_code == 504
    reader.data_received((-5).to_bytes(4, "big", signed=True))
    assert len(closed) == 1 and isinstance(closed[0], ValueError)


def test_lifecycle_records() -> None:
    dead = fatal_record(stage_id=2, request_id="r1")
    assert (dead.category, dead.status_code, dead.error_type, dead.fatal) == (
        "server",
        500,
        "InternalServerError",
        True,
    )
    assert (dead.message, dead.stage_id, dead.request_id) == (DEAD_MESSAGE, 2, "r1")
    assert fatal_record(stage_id=0, root_cause="weights missing").message == "weights missing"
    timeout = timeout_record("Stage 1 stopped responding", stage_id=1)
    assert (timeout.status_code, timeout.error_type, timeout.message) == (504, "GatewayTimeoutError", timeout.message)
    unavailable = unavailable_record("Stage 1 is at capacity; retry later", stage_id=1, request_id="r2")
    assert (unavailable.status_code, unavailable.error_type, unavailable.request_id) == (
        503,
        "ServiceUnavailableError",
        "r2",
    )


def test_state_moves() -> None:
    assert transition(State.NEW, State.STARTING) and transition(State.STARTING, State.DEAD)
    assert transition(State.RUNNING, State.DRAINING) and transition(State.DRAINING, State.STOPPING)
    assert not transition(State.DEAD, State.STOPPED)  # dead is terminal: health stays 503 "dead"
    assert not transition(State.STOPPING, State.DEAD)  # a stage leaving during a clean stop changes nothing
    assert not transition(State.STOPPED, State.RUNNING)
    assert [s for s in State if s.live] == [State.STARTING, State.RUNNING, State.DRAINING]


class _Link:
    """The kill path's view of a stage: alive until killed (it ignores terminate, like a hung one)."""

    def __init__(self, stage_id: int, obeys_terminate: bool) -> None:
        self.stage_id, self.obeys, self.alive, self.calls = stage_id, obeys_terminate, True, []

    def terminate(self) -> None:
        self.calls.append("terminate")
        self.alive = not self.obeys

    def kill(self) -> None:
        self.calls.append("kill")
        self.alive = False


def test_stop_plan_terminates_waits_then_kills() -> None:
    polite, hung = _Link(0, True), _Link(1, False)
    plan = StopPlan([polite, hung], grace=3.0)  # type: ignore[list-item]
    assert plan.step(100.0) and polite.calls == ["terminate"] and hung.calls == ["terminate"]
    assert plan.step(102.9) and hung.calls == ["terminate"]
    assert plan.step(103.0) and hung.calls == ["terminate", "kill"]  # killed at the grace
    assert not plan.step(103.01) and polite.calls == ["terminate"]  # nothing left: the plan ends


def test_stop_plan_forced_kills_at_once() -> None:
    hung = _Link(0, False)
    plan = StopPlan([hung], grace=3.0)  # type: ignore[list-item]
    assert plan.step(0.0)
    plan.force()
    assert plan.step(0.01) and hung.calls == ["terminate", "kill"]
    assert not plan.step(0.02)


def test_requests_are_answered_once() -> None:
    async def main() -> tuple[Requests, list[Any]]:
        requests = Requests()
        requests.open("a", None)
        requests.open("b", None)
        dead = fatal_record(stage_id=0)
        assert requests.fail("a", dead) and not requests.fail("a", dead)
        assert not requests.fail("b", dead, at_stage=1)  # a report from a stage b is not in
        assert requests.route(0, [("a", 1, True), ("b", 2, True)], emit=False, last=True) == []
        assert requests.fail_all(dead) == 0 and len(requests) == 0
        got = []
        for rid in ("a", "b"):
            try:
                got += [r async for r in requests.stream(rid, StageRequestError)]
            except StageRequestError as exc:
                got.append(exc.details.request_id)
        return requests, got

    requests, got = asyncio.run(main())
    assert got == ["a"]  # b finished normally (no results emitted), a failed once
    assert (requests.answered, requests.late) == (2, 3)  # late: a again, b from stage 1, a's output


def test_a_request_id_the_record_cannot_carry_never_turns_an_answer_into_an_exception() -> None:
    long_id, wide_id = "r" * 257, "é" * 200  # 257 characters; 200 characters but 400 UTF-8 bytes
    refused = Supervisor([StageSpec("toy:ARStage")])  # never started: not serving
    for rid in (long_id, wide_id, "ok"):
        with pytest.raises(omni_errors.OmniServerError) as info:
            refused.submit({}, request_id=rid)
        details = info.value.details
        assert (details.status_code, details.request_id) == (503, rid if rid == "ok" else None)

    async def main() -> list[str | None]:
        requests = Requests()
        for rid in (long_id, wide_id):
            requests.open(rid, None)
        assert requests.fail(long_id, fatal_record(stage_id=0))
        assert requests.fail_all(fatal_record(stage_id=1)) == 1
        got: list[str | None] = []
        for rid in (long_id, wide_id):
            with pytest.raises(StageRequestError) as failed:
                _ = [r async for r in requests.stream(rid, StageRequestError)]
            got.append(failed.value.details.request_id)
        return got

    assert asyncio.run(main()) == [None, None]  # answered, without the id the record cannot hold
