"""Admission while vLLM-Omni's stages are paused or asleep: every generation request is answered within a deadline.

vLLM-Omni's `AsyncOmni` closes admission (`_paused`) from `pause_generation` until
`resume_generation`, and for `sleep` (until `wake_up` for a diffusion-only engine, until
`resume_generation` otherwise); a request waits for it on `_pause_cond`. Without a deadline that
wait lasts as long as the pause or the sleep, while `/health` says "healthy". Here:

- `AdmissionGate` is the `_pause_cond` (vLLM-Omni builds it, or the plugin installs it): a request's
  wait for admission (`generate`, a streaming input's `_submit_with_admission`) lasts at most
  `ADMISSION_WAIT_S` (`settings.ADMISSION_WAIT`); then it gets 503 `ServiceUnavailableError` naming
  the stage, the state and the call that ends it, with `Retry-After` (`render.http.RETRY_AFTER_S`).
  The other wait on the condition, `sleep`'s drain of the requests already admitted, is left as it is.
- `closed(omni)` says which state keeps requests out and what ends it, read from `AsyncOmni`'s own
  fields; `health_state(omni)` is what `/health` adds to its 200 when that state is not "healthy",
  with the keys of vLLM's `/is_sleeping` and `/is_paused` (a paused or sleeping server is alive:
  503 stays for a dead engine, as in vLLM).
- `all_or_nothing(omni, verb, stage_ids, transition)` runs a sleep or wake-up so that it either
  happens on every stage it names or changes nothing: a call that raised, whose acks report a
  failure, or that a stage did not acknowledge, puts back every admission and sleep field and
  raises a record naming the stage (501 when the stage does not support it, or a level-2 sleep
  that cannot be woken; 500 otherwise). While it runs, the gate says so
  (`AdmissionGate.transition`), and a refused request is told which.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.server.answer_headers import retry_later
from omni_errors.settings import ADMISSION_WAIT

__all__ = [
    "ADMISSION_WAIT_S",
    "AdmissionGate",
    "Closed",
    "all_or_nothing",
    "closed",
    "first_stage",
    "health_state",
    "refusal",
]

_log = logging.getLogger("omni_errors.server")

#: Seconds a generation request waits for a paused or sleeping engine to admit it before its 503.
ADMISSION_WAIT_S = ADMISSION_WAIT.read()


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


#: `AsyncOmni`'s admission and sleep fields: what a failed sleep or wake-up puts back.
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

    def asleep(self, stages: tuple[int, ...]) -> bool:
        """Whether any of `stages` was asleep when the fields were saved."""
        per_stage = self.values["_stage_sleeping_tags"] or {}
        return any(per_stage.get(stage) for stage in stages) or (not per_stage and bool(self.values["_sleeping_tags"]))


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


def _stages(omni: Any, stage_ids: Any) -> tuple[int, ...] | None:
    """The stages a transition names (None: every stage), or None when `stage_ids` is not a list of
    ids (vLLM-Omni's own validation answers it)."""
    try:
        return tuple(range(len(omni.engine.stage_configs))) if stage_ids is None else tuple(stage_ids)
    except TypeError:
        return None


async def all_or_nothing(
    omni: Any, verb: Literal["sleep", "wake-up"], stage_ids: Any, transition: Awaitable[Any]
) -> Any:
    """Await `transition`, `omni`'s sleep or wake-up of `stage_ids` (None: every stage), all or
    nothing (the module docstring says how); returns its acks."""
    from omni_errors.semantics.exceptions import OmniNotImplementedError

    stages = _stages(omni, stage_ids)
    saved = _Saved.of(omni)
    gate = getattr(omni, "_pause_cond", None)
    if isinstance(gate, AdmissionGate):
        gate.transition = (verb, stages or ())
    try:
        try:
            acks = await transition
        except BaseException:
            await saved.restore(omni)
            raise
        finally:
            if isinstance(gate, AdmissionGate):
                gate.transition = None
    except NotImplementedError as exc:
        if verb != "wake-up":
            raise
        # vLLM-Omni 0.30 cannot wake a level-2 sleep.
        state = closed(omni)
        stage = state.stage_id if state is not None else 0
        raise OmniNotImplementedError(
            f"Stage {stage} slept at level 2 (its weights were discarded) and vLLM-Omni cannot wake it: "
            "restart the server",
            stage_id=stage,
        ) from exc
    if stages is None:
        return acks
    if not stages:  # no stage was named: a transition of nothing changes nothing
        await saved.restore(omni)
        return acks
    # A wake-up of stages already awake answers no acks; vLLM-Omni says so ("SKIPPED" at the route).
    if verb == "wake-up" and not acks and not saved.asleep(stages):
        return acks
    failure = _failure(verb, stages, list(acks or []))
    if failure is not None:
        await saved.restore(omni)
        raise failure
    return acks
