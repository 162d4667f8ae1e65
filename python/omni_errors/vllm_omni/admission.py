"""Admission while stages are paused or asleep: every generation request is answered within a deadline.

vLLM-Omni 0.30 closes admission (`AsyncOmni._paused`) from `pause_generation` until
`resume_generation`, and for `sleep` (until `wake_up` for a diffusion-only engine, until
`resume_generation` otherwise); `generate()` waits for it on `_pause_cond` without a deadline,
while `/health` says "healthy". With the plugin:

- `AdmissionGate` is each `AsyncOmni`'s `_pause_cond`: a request's wait for admission (`generate`,
  a streaming input's `_submit_with_admission`) lasts at most `ADMISSION_WAIT_S`
  (`ADMISSION_WAIT_ENV`); then it gets 503 `ServiceUnavailableError` naming the stage, the state
  and the call that ends it, with `Retry-After` (`RETRY_AFTER_S`). The other wait on the condition,
  `sleep`'s drain of the requests already admitted, is vLLM-Omni's own and left as it is.
- `sleep`/`wake_up`: a call that raised, whose acks report a failure, or that a stage did not
  acknowledge, puts back every admission and sleep field it changed and raises (a record naming
  the stage: 501 when the stage does not support it, 500 otherwise); the route records nothing
  either. A sleep of no stage changes nothing.
- `/health` keeps vLLM's meaning (200 unless the engine is dead: a paused or sleeping server is
  not one to restart) and says which state it is in with the keys of vLLM's `/is_sleeping` and
  `/is_paused`: `{"status": "sleeping", "is_sleeping": true, "is_paused": true}`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from omni_errors.env import number_from_env
from omni_errors.render.http import DEFAULT_RETRY_AFTER_S
from omni_errors.server.answer_headers import retry_later
from omni_errors.vllm_omni.settings import ADMISSION_WAIT_ENV, LOG_NAME, RETRY_AFTER_ENV

__all__ = [
    "ADMISSION_WAIT_S",
    "DEFAULT_ADMISSION_WAIT_S",
    "DEFAULT_RETRY_AFTER_S",
    "RETRY_AFTER_S",
    "AdmissionGate",
    "Closed",
    "closed",
    "make_health",
    "make_init",
    "make_sleep",
    "make_wake_up",
]

_log = logging.getLogger(LOG_NAME)

#: How long a request waits for admission to reopen before its 503: long enough to pass over a
#: pause that ends at once (a weight sync), short enough that a client never waits on a sleep.
DEFAULT_ADMISSION_WAIT_S = 0.5

_VALID = "a valid number of seconds"
ADMISSION_WAIT_S = number_from_env(ADMISSION_WAIT_ENV, DEFAULT_ADMISSION_WAIT_S, lambda v: v >= 0, _VALID)
#: The `Retry-After` of that 503 (when a retry may find the stage awake again): the renderer's hint.
RETRY_AFTER_S = math.ceil(number_from_env(RETRY_AFTER_ENV, DEFAULT_RETRY_AFTER_S, lambda v: v >= 1, _VALID))


def _is_admission(predicate: Callable[[], Any]) -> bool:
    """Whether a `wait_for` is a request's wait for admission: vLLM-Omni's `lambda: not self._paused`
    (in `generate` and `_submit_with_admission`; the manifest pins both sources)."""
    return getattr(getattr(predicate, "__code__", None), "co_names", ()) == ("_paused",)


class AdmissionGate(asyncio.Condition):
    """`AsyncOmni._pause_cond` with a deadline on admission; `transition` is the sleep or wake-up running."""

    def __init__(self, omni: Any) -> None:
        super().__init__()
        self._omni = weakref.ref(omni)
        self.transition: tuple[str, tuple[int, ...]] | None = None

    async def wait_for(self, predicate: Callable[[], Any]) -> Any:
        if not _is_admission(predicate):
            return await super().wait_for(predicate)
        result = predicate()
        if not result and ADMISSION_WAIT_S > 0:
            try:
                async with asyncio.timeout(ADMISSION_WAIT_S):
                    result = await super().wait_for(predicate)
            except TimeoutError:
                result = predicate()
        omni = self._omni()
        # Admission open while a stage is still asleep: vLLM-Omni would raise a bare RuntimeError.
        if not result or (omni is not None and getattr(omni, "_sleeping_tags", None)):
            raise refusal(omni)
        return result


@dataclass(frozen=True, slots=True)
class Closed:
    """Why admission is closed: the state's name, the stage it concerns, and what ends it."""

    state: str
    stage_id: int
    message: str


def _first(ids: Any, default: int = 0) -> int:
    ordered = sorted(i for i in ids if isinstance(i, int))
    return ordered[0] if ordered else default


def closed(omni: Any) -> Closed | None:
    """The state that keeps requests out of `omni`, or None when it admits them."""
    gate = getattr(omni, "_pause_cond", None)
    transition = gate.transition if isinstance(gate, AdmissionGate) else None
    asleep = list((getattr(omni, "_stage_sleeping_tags", None) or {}).keys())
    if not asleep and getattr(omni, "_sleeping_tags", None):
        asleep = [0]
    held = bool(getattr(omni, "_hold_admission_until_resume", False))
    then_resume = ", then resume generation (resume_generation, POST /resume)" if held else ""
    if transition is not None:
        verb, stages = transition
        stage = _first(stages or asleep)
        if verb == "wake-up":
            return Closed(
                "waking up", stage, f"Stage {stage} is waking up; retry once the wake-up completes{then_resume}"
            )
        return Closed("going to sleep", stage, f"Stage {stage} is going to sleep; wake it with POST /v1/omni/wakeup")
    if getattr(omni, "_level2_sleeping", False):
        stage = _first(asleep)
        return Closed(
            "sleeping (level 2)",
            stage,
            f"Stage {stage} is asleep at level 2 (its weights were discarded) and vLLM-Omni cannot wake it from "
            "level 2: restart the server",
        )
    if asleep:
        stage = _first(asleep)
        return Closed(
            "sleeping",
            stage,
            f'Stage {stage} is asleep: wake it with POST /v1/omni/wakeup {{"stage_ids": [{stage}]}}{then_resume}',
        )
    if getattr(omni, "_paused", False):
        stage = _first(getattr(omni, "_paused_stage_ids", ()) or ())
        return Closed("paused", stage, "Generation is paused: it resumes after resume_generation (POST /resume)")
    return None


def refusal(omni: Any) -> Exception:
    """The 503 a request gets while `omni` does not admit it, with `Retry-After`."""
    from omni_errors.semantics.core_table import unavailable_record
    from omni_errors.semantics.exceptions import OmniServerError

    state = closed(omni) if omni is not None else None
    if state is None:  # reopened since: the request may simply be retried
        state = Closed("paused", 0, "Generation was paused; retry")
    refused = OmniServerError.from_details(unavailable_record(state.message, stage_id=state.stage_id))
    return retry_later(refused, RETRY_AFTER_S)


def make_init(module: ModuleType, original: Any) -> Any:
    """`AsyncOmni.__init__`: its `_pause_cond` is an `AdmissionGate`."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._pause_cond = AdmissionGate(self)

    return __init__


_FIELDS = (
    "_paused",
    "_hold_admission_until_resume",
    "_paused_stage_ids",
    "_sleeping_tags",
    "_stage_sleeping_tags",
    "_level2_sleeping",
)


@dataclass(slots=True)
class _Saved:
    """The admission and sleep fields of an `AsyncOmni`, copied, to put back after a failed transition."""

    values: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, omni: Any) -> _Saved:
        saved = cls()
        for name in _FIELDS:
            value = getattr(omni, name, None)
            if isinstance(value, dict):
                value = {key: set(tags) for key, tags in value.items()}
            elif isinstance(value, set):
                value = set(value)
            saved.values[name] = value
        return saved

    async def restore(self, omni: Any) -> None:
        async with omni._pause_cond:
            for name, value in self.values.items():
                setattr(omni, name, value)
            omni._pause_cond.notify_all()


def _ack_error(ack: Any) -> str | None:
    """What a failed ack says (an `OmniACK` whose status is not SUCCESS, a `{"supported": False}` dict)."""
    if isinstance(ack, dict):
        if ack.get("supported") is False or ack.get("error"):
            return str(ack.get("error") or "not supported")
        return None
    status = getattr(ack, "status", "SUCCESS")
    return None if status == "SUCCESS" else str(getattr(ack, "error_msg", None) or status)


def _unsupported(ack: Any) -> bool:
    return isinstance(ack, dict) and ack.get("supported") is False


def _failure(verb: str, stages: tuple[int, ...], acks: list[Any]) -> Exception | None:
    """The record to raise when `acks` do not confirm `verb` on every stage of `stages`."""
    from omni_errors.semantics.exceptions import OmniEngineGenerateError, OmniNotImplementedError

    failed = [ack for ack in acks if _ack_error(ack) is not None]
    confirmed = {getattr(ack, "stage_id", None) for ack in acks if _ack_error(ack) is None and ack is not None}
    missing = [stage for stage in stages if stage not in confirmed]
    if not failed and not missing:
        return None
    stage = _first([s for s in (getattr(a, "stage_id", None) for a in failed) if s is not None] or missing or stages)
    for ack in failed:
        _log.warning("omni-errors: %s of stage %d failed: %s", verb, stage, _ack_error(ack))
    if failed and all(_unsupported(ack) for ack in failed):
        return OmniNotImplementedError(f"Stage {stage} does not support {verb}; nothing was changed", stage_id=stage)
    reason = "reported a failure" if failed else "did not acknowledge it"
    return OmniEngineGenerateError(f"Stage {stage} {reason} during {verb}; nothing was changed", stage_id=stage)


def _stages(omni: Any, stage_ids: Any) -> tuple[int, ...]:
    if stage_ids is None:
        return tuple(range(len(omni.engine.stage_configs)))
    return tuple(stage_ids)


def _asleep(saved: _Saved, stages: tuple[int, ...]) -> bool:
    per_stage = saved.values["_stage_sleeping_tags"] or {}
    return any(per_stage.get(stage) for stage in stages) or (not per_stage and bool(saved.values["_sleeping_tags"]))


def _transition(verb: str, module: ModuleType, original: Any) -> Any:
    signature = inspect.signature(original)

    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        try:
            stages: tuple[int, ...] | None = _stages(self, bound.arguments.get("stage_ids"))
        except TypeError:  # not a list of stage ids: vLLM-Omni's own validation answers it
            stages = None
        saved = _Saved.of(self)
        gate = self._pause_cond
        if isinstance(gate, AdmissionGate):
            gate.transition = (verb, stages or ())
        try:
            try:
                acks = await original(*bound.args, **bound.kwargs)
            except BaseException:
                await saved.restore(self)
                raise
        finally:
            if isinstance(gate, AdmissionGate):
                gate.transition = None
        if stages is None:
            return acks
        if not stages:  # no stage was named: a sleep of nothing closes nothing
            await saved.restore(self)
            return acks
        # A wake-up of stages already awake answers no acks; vLLM-Omni says so ("SKIPPED" at the route).
        if verb == "wake-up" and not acks and not _asleep(saved, stages):
            return acks
        failure = _failure(verb, stages, list(acks or []))
        if failure is not None:
            await saved.restore(self)
            raise failure
        return acks

    return run


def make_sleep(module: ModuleType, original: Any) -> Any:
    """`AsyncOmni.sleep`: all or nothing (see the module docstring)."""
    return _transition("sleep", module, original)


def make_wake_up(module: ModuleType, original: Any) -> Any:
    """`AsyncOmni.wake_up`: all or nothing; after a level-2 sleep, 501 naming the stage."""
    from omni_errors.semantics.exceptions import OmniNotImplementedError

    run = _transition("wake-up", module, original)

    async def wake_up(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await run(self, *args, **kwargs)
        except NotImplementedError as exc:  # vLLM-Omni 0.30 cannot wake a level-2 sleep
            state = closed(self)
            stage = state.stage_id if state is not None else 0
            raise OmniNotImplementedError(
                f"Stage {stage} slept at level 2 (its weights were discarded) and vLLM-Omni cannot wake it: "
                "restart the server",
                stage_id=stage,
            ) from exc

    return wake_up


def make_health(module: ModuleType, original: Any) -> Any:
    """vLLM-Omni's `/health` route: the same status; the body says whether it is paused or asleep.

    The router registered the original when the module was imported: its route is pointed at the
    replacement, before the app includes the router.
    """
    import functools
    import json

    from fastapi.responses import JSONResponse

    @functools.wraps(original)
    async def health(raw_request: Any) -> Any:
        response = await original(raw_request)
        engine = getattr(raw_request.app.state, "engine_client", None)
        if engine is None or response.status_code != 200:
            return response
        state = closed(engine)
        if state is None:
            return response
        body = json.loads(bytes(response.body))
        body.update(
            status=state.state,
            is_sleeping=bool(getattr(engine, "_sleeping_tags", None)),
            is_paused=bool(getattr(engine, "_paused", False)),
            stage_id=state.stage_id,
            message=state.message,
        )
        return JSONResponse(content=body, status_code=200)

    for route in module.router.routes:
        if getattr(route, "endpoint", None) is original:
            route.endpoint = health
    return health
