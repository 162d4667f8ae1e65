"""Admission while stages are paused or asleep: the plugin's half of the core's
`omni_errors.server.admission` (every generation request answered within a deadline).

- `AsyncOmni.__init__`: its `_pause_cond` is the core's `AdmissionGate`.
- `sleep`/`wake_up`: a call that raised, whose acks report a failure, or that a stage did not
  acknowledge, puts back every admission and sleep field it changed and raises (a record naming
  the stage: 501 when the stage does not support it, 500 otherwise); the route records nothing
  either. A sleep of no stage changes nothing. While one runs, the gate says so
  (`AdmissionGate.transition`).
- `/health` keeps vLLM's meaning (200 unless the engine is dead: a paused or sleeping server is
  not one to restart) and says which state it is in (`health_state`):
  `{"status": "sleeping", "is_sleeping": true, "is_paused": true, ...}`.
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from omni_errors.server.admission import AdmissionGate, closed, first_stage, health_state
from omni_errors.vllm_omni.settings import LOG_NAME

__all__ = ["make_health", "make_init", "make_sleep", "make_wake_up"]

_log = logging.getLogger(LOG_NAME)


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
    failed_stages = [s for s in (getattr(a, "stage_id", None) for a in failed) if s is not None]
    stage = first_stage(failed_stages or missing or stages)
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
        state = health_state(engine)
        if not state:
            return response
        return JSONResponse(content={**json.loads(bytes(response.body)), **state}, status_code=200)

    for route in module.router.routes:
        if getattr(route, "endpoint", None) is original:
            route.endpoint = health
    return health
