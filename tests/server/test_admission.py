"""The admission gate over an engine with `AsyncOmni`'s admission fields, handing them over as the
upstream series has `AsyncOmni` do (its state as values, its fields saved and put back): a request's
wait for a paused or sleeping engine ends with a 503 naming the state; every other wait is the
condition's own. The real `AsyncOmni` behind a real server: tests/vllm_omni/test_http_surface.py."""

from __future__ import annotations

import asyncio
import copy
from types import SimpleNamespace
from typing import Any

import pytest
from omni_errors import classify
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.semantics.exceptions import OmniServerError
from omni_errors.server.admission import (
    AdmissionGate,
    AdmissionState,
    Closed,
    all_or_nothing,
    first_stage,
    health_state,
)


class Engine:
    """The admission and sleep fields `AsyncOmni.__init__` sets, and its two kinds of wait."""

    def __init__(self) -> None:
        self._pause_cond = AdmissionGate(self._admission_state)
        self._paused = False
        self._admitting = 0
        self._hold_admission_until_resume = False
        self._paused_stage_ids: set[int] = set()
        self._sleeping_tags: set[str] = set()
        self._stage_sleeping_tags: dict[int, set[str]] = {}
        self._level2_sleeping = False

    async def admit(self) -> bool:  # `generate`'s wait, as the series has vLLM-Omni write it
        async with self._pause_cond:
            result: bool = await self._pause_cond.admit(lambda: not self._paused)
            return result

    async def drain(self) -> bool:  # `sleep`'s wait for the requests already admitted
        async with self._pause_cond:
            result: bool = await self._pause_cond.wait_for(lambda: self._admitting == 0)
            return result

    def _admission_state(self) -> AdmissionState:
        return AdmissionState(
            paused=self._paused,
            paused_stages=tuple(self._paused_stage_ids),
            sleeping=bool(self._sleeping_tags),
            asleep_stages=tuple(self._stage_sleeping_tags),
            held_until_resume=self._hold_admission_until_resume,
            level2=self._level2_sleeping,
        )

    def _save_admission(self) -> dict[str, Any]:
        return copy.deepcopy({name: getattr(self, name) for name in FIELDS})

    async def _restore_admission(self, saved: dict[str, Any]) -> None:
        async with self._pause_cond:
            self.__dict__.update(saved)
            self._pause_cond.notify_all()


#: The fields a failed sleep or wake-up puts back.
FIELDS = (
    "_paused",
    "_hold_admission_until_resume",
    "_paused_stage_ids",
    "_sleeping_tags",
    "_stage_sleeping_tags",
    "_level2_sleeping",
)


def closed(engine: Engine) -> Closed | None:
    return engine._pause_cond.closed()


def _all_or_nothing(engine: Engine, verb: Any, stage_ids: Any, transition: Any) -> Any:
    """`AsyncOmni.sleep` or `.wake_up` as the series writes them, over one stage."""
    return all_or_nothing(
        engine._pause_cond,
        verb,
        stage_ids,
        transition,
        stage_count=1,
        save=engine._save_admission,
        restore=engine._restore_admission,
    )


def _refused(engine: Engine) -> OmniServerError:
    with pytest.raises(OmniServerError) as caught:
        asyncio.run(engine.admit())
    return caught.value


def test_an_open_gate_admits_at_once() -> None:
    assert asyncio.run(Engine().admit()) is True


def test_a_request_to_a_paused_engine_gets_a_503_naming_the_state_and_when_to_retry() -> None:
    engine = Engine()
    engine._paused = True
    refused = _refused(engine)
    details = refused.details
    assert (details.status_code, details.error_type, details.stage_id) == (503, "ServiceUnavailableError", 0)
    assert details.message == "Generation is paused: it resumes after resume_generation (POST /resume)"
    assert refused.retry_after == RETRY_AFTER_S


def test_a_request_is_admitted_when_the_pause_ends_within_its_wait() -> None:
    engine = Engine()
    engine._paused = True

    async def resume_while_waiting() -> bool:
        waiting = asyncio.create_task(engine.admit())
        await asyncio.sleep(0)  # the request is waiting on the gate
        async with engine._pause_cond:
            engine._paused = False
            engine._pause_cond.notify_all()
        return await waiting

    assert asyncio.run(resume_while_waiting()) is True


def test_an_open_gate_with_a_stage_still_asleep_refuses_naming_the_stage() -> None:
    engine = Engine()
    engine._stage_sleeping_tags = {1: {"weights"}}
    engine._sleeping_tags = {"weights"}
    details = _refused(engine).details
    assert details.stage_id == 1
    assert details.message == 'Stage 1 is asleep: wake it with POST /v1/omni/wakeup {"stage_ids": [1]}'


def test_a_wait_that_is_not_admission_is_the_conditions_own() -> None:
    engine = Engine()
    engine._paused = True  # a sleep closed admission, and waits for the admitted requests
    engine._admitting = 1

    async def release_while_draining() -> bool:
        draining = asyncio.create_task(engine.drain())
        await asyncio.sleep(0)
        async with engine._pause_cond:
            engine._admitting = 0
            engine._pause_cond.notify_all()
        return await draining

    assert asyncio.run(release_while_draining()) is True


def _state_of(**fields: Any) -> tuple[str, int, str] | None:
    engine = Engine()
    transition = fields.pop("transition", None)
    engine._pause_cond.transition = transition
    engine.__dict__.update(fields)
    state = closed(engine)
    return None if state is None else (state.state, state.stage_id, state.message)


def test_closed_names_each_state_its_stage_and_the_way_out() -> None:
    assert _state_of() is None
    assert _state_of(transition=("sleep", (2, 1))) == (
        "going to sleep",
        1,
        "Stage 1 is going to sleep; wake it with POST /v1/omni/wakeup",
    )
    assert _state_of(transition=("wake-up", (0,)), _hold_admission_until_resume=True) == (
        "waking up",
        0,
        "Stage 0 is waking up; retry once the wake-up completes, then resume generation "
        "(resume_generation, POST /resume)",
    )
    level2 = _state_of(_level2_sleeping=True, _stage_sleeping_tags={0: {"weights"}})
    assert level2 is not None and level2[:2] == ("sleeping (level 2)", 0) and "restart the server" in level2[2]
    assert _state_of(_paused=True, _paused_stage_ids={3}) == (
        "paused",
        3,
        "Generation is paused: it resumes after resume_generation (POST /resume)",
    )


def test_health_adds_the_state_only_while_admission_is_closed() -> None:
    engine = Engine()
    assert health_state(engine._pause_cond) == {}
    engine._paused = True
    engine._sleeping_tags = {"weights"}
    assert health_state(engine._pause_cond) == {
        "status": "sleeping",
        "is_sleeping": True,
        "is_paused": True,
        "stage_id": 0,
        "message": 'Stage 0 is asleep: wake it with POST /v1/omni/wakeup {"stage_ids": [0]}',
    }


def test_the_first_stage_is_the_lowest_id_and_ignores_what_is_not_one() -> None:
    assert first_stage([3, "x", 1, None]) == 1
    assert first_stage([], default=4) == 4


def _ack(stage_id: int, status: str = "SUCCESS", error_msg: str | None = None) -> SimpleNamespace:
    """What `OmniACK` carries that a transition's check reads."""
    return SimpleNamespace(stage_id=stage_id, status=status, error_msg=error_msg)


async def _sleep(engine: Engine, acks: list[Any], seen: list[str | None]) -> list[Any]:
    """A sleep of stage 0 as vLLM-Omni's does it: admission closed, the stage marked asleep."""
    state = closed(engine)
    seen.append(None if state is None else state.state)
    async with engine._pause_cond:
        engine._paused = True
    engine._stage_sleeping_tags = {0: {"weights", "kv_cache"}}
    engine._sleeping_tags = {"weights", "kv_cache"}
    engine._level2_sleeping = True
    return acks


def _fields(engine: Engine) -> tuple[Any, ...]:
    return (engine._paused, engine._stage_sleeping_tags, engine._sleeping_tags, engine._level2_sleeping)


def test_a_sleep_confirmed_by_every_stage_keeps_its_fields_and_marks_the_gate_while_it_runs() -> None:
    engine, seen = Engine(), []
    acks = [_ack(0)]
    assert asyncio.run(_all_or_nothing(engine, "sleep", [0], _sleep(engine, acks, seen))) is acks
    assert seen == ["going to sleep"]
    assert engine._pause_cond.transition is None
    assert _fields(engine) == (True, {0: {"weights", "kv_cache"}}, {"weights", "kv_cache"}, True)


@pytest.mark.parametrize(
    ("acks", "status", "message"),
    [
        ([_ack(0, "ERROR", "offload failed")], 500, "Stage 0 reported a failure during sleep; nothing was changed"),
        ([], 500, "Stage 0 did not acknowledge it during sleep; nothing was changed"),
        ([{"supported": False}], 501, "Stage 0 does not support sleep; nothing was changed"),
    ],
    ids=["failed-ack", "no-ack", "unsupported"],
)
def test_a_sleep_not_confirmed_puts_every_field_back_and_raises_naming_the_stage(
    acks: list[Any], status: int, message: str
) -> None:
    engine = Engine()
    before = _fields(engine)
    with pytest.raises(Exception) as caught:
        asyncio.run(_all_or_nothing(engine, "sleep", [0], _sleep(engine, acks, [])))
    details = classify(caught.value)
    assert (details.status_code, details.message, details.stage_id) == (status, message, 0)
    assert _fields(engine) == before
    assert closed(engine) is None


def test_a_sleep_that_raises_puts_every_field_back_and_raises_the_same() -> None:
    engine = Engine()

    async def failing() -> list[Any]:
        engine._paused = True
        raise ConnectionError("stage gone")

    with pytest.raises(ConnectionError):
        asyncio.run(_all_or_nothing(engine, "sleep", [0], failing()))
    assert (engine._paused, engine._pause_cond.transition) == (False, None)


def test_a_sleep_of_no_stage_changes_nothing() -> None:
    engine = Engine()
    assert asyncio.run(_all_or_nothing(engine, "sleep", [], _sleep(engine, [], []))) == []
    assert _fields(engine) == (False, {}, set(), False)


def test_a_wake_up_of_a_level_2_sleep_is_a_501_naming_the_stage() -> None:
    engine = Engine()
    engine._stage_sleeping_tags, engine._sleeping_tags, engine._level2_sleeping = {2: {"weights"}}, {"weights"}, True

    async def cannot() -> list[Any]:
        raise NotImplementedError("wake_up() after sleep(level=2) is not yet implemented")

    with pytest.raises(Exception) as caught:
        asyncio.run(_all_or_nothing(engine, "wake-up", [2], cannot()))
    details = classify(caught.value)
    assert (details.status_code, details.error_type, details.stage_id) == (501, "NotImplementedError", 2)
    assert "restart the server" in details.message


def test_a_wake_up_of_stages_already_awake_answers_no_acks() -> None:
    engine = Engine()

    async def skipped() -> list[Any]:
        return []

    assert asyncio.run(_all_or_nothing(engine, "wake-up", [0], skipped())) == []
