"""Admission while stages are paused or asleep: the plugin's calls of the core's
`omni_errors.server.admission` (every generation request answered within a deadline; a sleep or
wake-up all or nothing), which the upstream series has vLLM-Omni make itself.

The core never reads `AsyncOmni`'s fields; the plugin does, as the series has `AsyncOmni` do with
its own: its admission as values (`state_of`), and its fields saved and put back around a sleep or
wake-up (`save`, `restore`).

- `AsyncOmni.__init__`: its `_pause_cond` is a `ReleasedGate`.
- `AsyncOmni.sleep`, `.wake_up`: each call runs through `all_or_nothing`.
- `/health` keeps vLLM's meaning (200 unless the engine is dead: a paused or sleeping server is
  not one to restart) and says which state it is in (`health_state`):
  `{"status": "sleeping", "is_sleeping": true, "is_paused": true, ...}`.
"""

from __future__ import annotations

import inspect
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any, Literal

from omni_errors.server.admission import AdmissionGate, AdmissionState, all_or_nothing, health_state

__all__ = ["ReleasedGate", "make_health", "make_init", "make_sleep", "make_wake_up", "restore", "save", "state_of"]

#: `AsyncOmni`'s admission and sleep fields: what a failed sleep or wake-up puts back.
FIELDS = (
    "_paused",
    "_hold_admission_until_resume",
    "_paused_stage_ids",
    "_sleeping_tags",
    "_stage_sleeping_tags",
    "_level2_sleeping",
)


def state_of(omni: Any) -> Callable[[], AdmissionState]:
    """`omni`'s admission as values, read when asked (a weak reference: the gate is `omni`'s own)."""
    ref = weakref.ref(omni)

    def state() -> AdmissionState:
        owner = ref()
        if owner is None:
            return AdmissionState()
        return AdmissionState(
            paused=bool(getattr(owner, "_paused", False)),
            paused_stages=tuple(getattr(owner, "_paused_stage_ids", ()) or ()),
            sleeping=bool(getattr(owner, "_sleeping_tags", None)),
            asleep_stages=tuple((getattr(owner, "_stage_sleeping_tags", None) or {}).keys()),
            held_until_resume=bool(getattr(owner, "_hold_admission_until_resume", False)),
            level2=bool(getattr(owner, "_level2_sleeping", False)),
        )

    return state


def save(omni: Any) -> dict[str, Any]:
    """`omni`'s admission and sleep fields, copied."""
    saved = {}
    for name in FIELDS:
        value = getattr(omni, name, None)
        if isinstance(value, dict):
            value = {key: set(tags) for key, tags in value.items()}
        elif isinstance(value, set):
            value = set(value)
        saved[name] = value
    return saved


async def restore(omni: Any, saved: dict[str, Any]) -> None:
    """Puts back what `save` copied, and wakes the requests waiting for admission to look again."""
    async with omni._pause_cond:
        for name, value in saved.items():
            setattr(omni, name, value)
        omni._pause_cond.notify_all()


def _is_admission(predicate: Callable[[], Any]) -> bool:
    """Whether a `wait_for` is a request's wait for admission: vLLM-Omni 0.30's `lambda: not self._paused`
    (in `generate` and `_submit_with_admission`), which reads that one name."""
    return getattr(getattr(predicate, "__code__", None), "co_names", ()) == ("_paused",)


class ReleasedGate(AdmissionGate):
    """The gate in a released vLLM-Omni, whose requests wait for admission with `wait_for`: that wait
    is the gate's `admit`; every other wait is the condition's own."""

    async def wait_for(self, predicate: Callable[[], Any]) -> Any:
        if _is_admission(predicate):
            return await self.admit(predicate)
        return await super().wait_for(predicate)


def make_init(module: ModuleType, original: Any) -> Any:
    """`AsyncOmni.__init__`: its `_pause_cond` is a `ReleasedGate`."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._pause_cond = ReleasedGate(state_of(self))

    return __init__


def _all_or_nothing(verb: Literal["sleep", "wake-up"], original: Any) -> Any:
    signature = inspect.signature(original)

    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        return await all_or_nothing(
            self._pause_cond,
            verb,
            bound.arguments.get("stage_ids"),
            original(*bound.args, **bound.kwargs),
            stage_count=len(self.engine.stage_configs),
            save=lambda: save(self),
            restore=lambda saved: restore(self, saved),
        )

    return run


def make_sleep(module: ModuleType, original: Any) -> Any:
    """`AsyncOmni.sleep`: all or nothing (`omni_errors.server.admission.all_or_nothing`)."""
    return _all_or_nothing("sleep", original)


def make_wake_up(module: ModuleType, original: Any) -> Any:
    """`AsyncOmni.wake_up`: all or nothing; after a level-2 sleep, 501 naming the stage."""
    return _all_or_nothing("wake-up", original)


def make_health(module: ModuleType, original: Any) -> Any:
    """vLLM-Omni's `/health` route: the same status; the body says whether it is paused or asleep.

    The router registered the original when the module was imported: its route is pointed at the
    replacement, before the app includes the router.
    """
    import functools
    import json

    from fastapi.responses import JSONResponse

    from omni_errors_vllm_omni.patching import point_route

    @functools.wraps(original)
    async def health(raw_request: Any) -> Any:
        response = await original(raw_request)
        engine = getattr(raw_request.app.state, "engine_client", None)
        if engine is None or response.status_code != 200:
            return response
        state = health_state(getattr(engine, "_pause_cond", None))
        if not state:
            return response
        return JSONResponse(content={**json.loads(bytes(response.body)), **state}, status_code=200)

    point_route(module.router, original, health)
    return health
