"""Admission while vLLM-Omni's stages are paused or asleep: every generation request is answered within a deadline.

vLLM-Omni's `AsyncOmni` closes admission (`_paused`) from `pause_generation` until
`resume_generation`, and for `sleep` (until `wake_up` for a diffusion-only engine, until
`resume_generation` otherwise); a request waits for it on `_pause_cond`. Without a deadline that
wait lasts as long as the pause or the sleep, while `/health` says "healthy". Here:

- `AdmissionGate` is the `_pause_cond` (vLLM-Omni builds it, or the plugin installs it): a request's
  wait for admission (`generate`, a streaming input's `_submit_with_admission`) lasts at most
  `ADMISSION_WAIT_S` (`ADMISSION_WAIT_ENV`); then it gets 503 `ServiceUnavailableError` naming the
  stage, the state and the call that ends it, with `Retry-After` (`RETRY_AFTER_S`). The other wait
  on the condition, `sleep`'s drain of the requests already admitted, is left as it is.
- `closed(omni)` says which state keeps requests out and what ends it, read from `AsyncOmni`'s own
  fields; `health_state(omni)` is what `/health` adds to its 200 when that state is not "healthy",
  with the keys of vLLM's `/is_sleeping` and `/is_paused` (a paused or sleeping server is alive:
  503 stays for a dead engine, as in vLLM).
- `AdmissionGate.transition` is the sleep or wake-up running, set by whoever runs it.
"""

from __future__ import annotations

import asyncio
import math
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from omni_errors.env import number_from_env
from omni_errors.render.http import DEFAULT_RETRY_AFTER_S
from omni_errors.server.answer_headers import retry_later

__all__ = [
    "ADMISSION_WAIT_ENV",
    "ADMISSION_WAIT_S",
    "DEFAULT_ADMISSION_WAIT_S",
    "RETRY_AFTER_ENV",
    "RETRY_AFTER_S",
    "AdmissionGate",
    "Closed",
    "closed",
    "first_stage",
    "health_state",
    "refusal",
]

#: Seconds a generation request waits for a paused or sleeping engine to admit it before its 503.
ADMISSION_WAIT_ENV = "OMNI_ERRORS_ADMISSION_WAIT_S"
#: The `Retry-After` (whole seconds) of that 503.
RETRY_AFTER_ENV = "OMNI_ERRORS_RETRY_AFTER_S"
#: Long enough to pass over a pause that ends at once (a weight sync), short enough that a client
#: never waits on a sleep.
DEFAULT_ADMISSION_WAIT_S = 0.5

_VALID = "a valid number of seconds"
ADMISSION_WAIT_S = number_from_env(ADMISSION_WAIT_ENV, DEFAULT_ADMISSION_WAIT_S, lambda v: v >= 0, _VALID)
#: When a retry may find the stage awake again: the renderer's hint unless set.
RETRY_AFTER_S = math.ceil(number_from_env(RETRY_AFTER_ENV, DEFAULT_RETRY_AFTER_S, lambda v: v >= 1, _VALID))


def _is_admission(predicate: Callable[[], Any]) -> bool:
    """Whether a `wait_for` is a request's wait for admission: vLLM-Omni's `lambda: not self._paused`
    (in `generate` and `_submit_with_admission`), which reads that one name."""
    return getattr(getattr(predicate, "__code__", None), "co_names", ()) == ("_paused",)


class AdmissionGate(asyncio.Condition):
    """`AsyncOmni._pause_cond` with a deadline on admission; `transition` is the sleep or wake-up running
    (its verb and stages), for the message a refused request gets."""

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


def first_stage(ids: Iterable[Any], default: int = 0) -> int:
    """The lowest stage id among `ids` (the stage a message names), or `default` when none is one."""
    ordered = sorted(i for i in ids if isinstance(i, int))
    return ordered[0] if ordered else default


def closed(omni: Any) -> Closed | None:
    """The state that keeps requests out of `omni` (an `AsyncOmni`), or None when it admits them."""
    gate = getattr(omni, "_pause_cond", None)
    transition = gate.transition if isinstance(gate, AdmissionGate) else None
    asleep = list((getattr(omni, "_stage_sleeping_tags", None) or {}).keys())
    if not asleep and getattr(omni, "_sleeping_tags", None):
        asleep = [0]
    held = bool(getattr(omni, "_hold_admission_until_resume", False))
    then_resume = ", then resume generation (resume_generation, POST /resume)" if held else ""
    if transition is not None:
        verb, stages = transition
        stage = first_stage(stages or asleep)
        if verb == "wake-up":
            return Closed(
                "waking up", stage, f"Stage {stage} is waking up; retry once the wake-up completes{then_resume}"
            )
        return Closed("going to sleep", stage, f"Stage {stage} is going to sleep; wake it with POST /v1/omni/wakeup")
    if getattr(omni, "_level2_sleeping", False):
        stage = first_stage(asleep)
        return Closed(
            "sleeping (level 2)",
            stage,
            f"Stage {stage} is asleep at level 2 (its weights were discarded) and vLLM-Omni cannot wake it from "
            "level 2: restart the server",
        )
    if asleep:
        stage = first_stage(asleep)
        return Closed(
            "sleeping",
            stage,
            f'Stage {stage} is asleep: wake it with POST /v1/omni/wakeup {{"stage_ids": [{stage}]}}{then_resume}',
        )
    if getattr(omni, "_paused", False):
        stage = first_stage(getattr(omni, "_paused_stage_ids", ()) or ())
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


def health_state(omni: Any) -> dict[str, Any]:
    """What `/health`'s 200 body says of `omni`'s admission: nothing while it admits requests, else
    its state (`status`), vLLM's `is_sleeping` and `is_paused`, the stage and how to leave the state."""
    state = closed(omni)
    if state is None:
        return {}
    return {
        "status": state.state,
        "is_sleeping": bool(getattr(omni, "_sleeping_tags", None)),
        "is_paused": bool(getattr(omni, "_paused", False)),
        "stage_id": state.stage_id,
        "message": state.message,
    }
