"""Admission while stages are paused or asleep: the plugin's calls of the core's
`omni_errors.server.admission` (every generation request answered within a deadline; a sleep or
wake-up all or nothing), which the upstream series has vLLM-Omni make itself.

- `AsyncOmni.__init__`: its `_pause_cond` is the core's `AdmissionGate`.
- `AsyncOmni.sleep`, `.wake_up`: each call runs through `all_or_nothing`.
- `/health` keeps vLLM's meaning (200 unless the engine is dead: a paused or sleeping server is
  not one to restart) and says which state it is in (`health_state`):
  `{"status": "sleeping", "is_sleeping": true, "is_paused": true, ...}`.
"""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any, Literal

from omni_errors.server.admission import AdmissionGate, all_or_nothing, health_state

__all__ = ["make_health", "make_init", "make_sleep", "make_wake_up"]


def make_init(module: ModuleType, original: Any) -> Any:
    """`AsyncOmni.__init__`: its `_pause_cond` is an `AdmissionGate`."""

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        self._pause_cond = AdmissionGate(self)

    return __init__


def _all_or_nothing(verb: Literal["sleep", "wake-up"], original: Any) -> Any:
    signature = inspect.signature(original)

    async def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        return await all_or_nothing(self, verb, bound.arguments.get("stage_ids"), original(*bound.args, **bound.kwargs))

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
