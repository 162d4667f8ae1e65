"""Admission while a server's stages are paused or asleep: every generation request is answered within a deadline.

vLLM-Omni's `AsyncOmni` closes admission from `pause_generation` until `resume_generation`, and for
`sleep` (until `wake_up` for a diffusion-only engine, until `resume_generation` otherwise); a
request waits for it on `_pause_cond`. Without a deadline that wait lasts as long as the pause or
the sleep, while `/health` says "healthy". omni-errors never reads the server's fields: the server
hands its state over as values (`AdmissionState`, from a callable it gives the gate) and, for a
sleep or wake-up, a way to save and put back its own fields. Here:

- `AdmissionGate` is the `_pause_cond` (vLLM-Omni builds it, or the plugin installs it): a request's
  wait for admission (`admit`, in `generate` and a streaming input's `_submit_with_admission`) lasts
  at most `ADMISSION_WAIT_S` (`settings.ADMISSION_WAIT`); then it gets 503 `ServiceUnavailableError`
  naming the stage, the state and the call that ends it, with `Retry-After`
  (`render.http.RETRY_AFTER_S`). Every other wait on the condition (`wait_for`, such as `sleep`'s
  drain of the requests already admitted) is the condition's own.
- `closed(state)` says which state keeps requests out and what ends it; `health_state(gate)` is what
  `/health` adds to its 200 when that state is not "healthy", with the keys of vLLM's `/is_sleeping`
  and `/is_paused` (a paused or sleeping server is alive: 503 stays for a dead engine, as in vLLM).
- `all_or_nothing(gate, verb, stage_ids, transition, stage_count=, save=, restore=)` runs a sleep or
  wake-up so that it either happens on every stage it names or changes nothing: a call that raised,
  whose acks report a failure, or that a stage did not acknowledge, has the server put back what
  `save` copied and raises a record naming the stage (501 when the stage does not support it, or a
  level-2 sleep that cannot be woken; 500 otherwise). While it runs, the gate says so
  (`AdmissionGate.transition`), and a refused request is told which.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from omni_errors.render.http import RETRY_AFTER_S
from omni_errors.server.answer_headers import retry_later
from omni_errors.settings import ADMISSION_WAIT

__all__ = [
    "ADMISSION_WAIT_S",
    "AdmissionGate",
    "AdmissionState",
    "Closed",
    "all_or_nothing",
    "closed",
    "first_stage",
    "health_state",
    "refusal",
]

_log = logging.getLogger(__name__)

#: Seconds a generation request waits for a paused or sleeping engine to admit it before its 503.
ADMISSION_WAIT_S = ADMISSION_WAIT.read()


@dataclass(frozen=True, slots=True)
class AdmissionState:
    """A server's admission and sleep, as values its owner reads from its own fields.

    `asleep_stages` are the stages asleep by their own tags; `sleeping` is any sleep at all (vLLM's
    `is_sleeping`: an engine-wide sleep names no stage, and is read as stage 0's).
    """

    paused: bool = False
    paused_stages: tuple[int, ...] = ()
    sleeping: bool = False
    asleep_stages: tuple[int, ...] = ()
    held_until_resume: bool = False
    level2: bool = False


@dataclass(frozen=True, slots=True)
class Closed:
    """Why admission is closed: the state's name, the stage it concerns, and what ends it."""

    state: str
    stage_id: int
    message: str


class AdmissionGate(asyncio.Condition):
    """`AsyncOmni._pause_cond` with a deadline on admission. `state` gives the server's admission as
    values whenever asked; `transition` is the sleep or wake-up running (its verb and stages), for
    the message a refused request gets."""

    def __init__(self, state: Callable[[], AdmissionState]) -> None:
        super().__init__()
        self.state = state
        self.transition: tuple[str, tuple[int, ...]] | None = None

    async def admit(self, predicate: Callable[[], Any]) -> Any:
        """A request's wait for admission (`predicate`: admission is open), at most `ADMISSION_WAIT_S`;
        the lock is held, as for `wait_for`. Refused with a 503 when it is still closed then, or
        when it opens while a stage is still asleep (vLLM-Omni would raise a bare RuntimeError)."""
        result = predicate()
        if not result and ADMISSION_WAIT_S > 0:
            try:
                async with asyncio.timeout(ADMISSION_WAIT_S):
                    result = await super().wait_for(predicate)
            except TimeoutError:
                result = predicate()
        if not result or self.state().sleeping:
            raise refusal(self.closed())
        return result

    def closed(self) -> Closed | None:
        """The state that keeps requests out now, or None when the server admits them."""
        return closed(self.state(), self.transition)


def first_stage(ids: Iterable[Any], default: int = 0) -> int:
    """The lowest stage id among `ids` (the stage a message names), or `default` when none is one."""
    ordered = sorted(i for i in ids if isinstance(i, int))
    return ordered[0] if ordered else default


def closed(state: AdmissionState, transition: tuple[str, tuple[int, ...]] | None = None) -> Closed | None:
    """The state that keeps requests out (with the sleep or wake-up running, if any), or None when
    the server admits them."""
    asleep = list(state.asleep_stages) or ([0] if state.sleeping else [])
    then_resume = ", then resume generation (resume_generation, POST /resume)" if state.held_until_resume else ""
    if transition is not None:
        verb, stages = transition
        stage = first_stage(stages or asleep)
        if verb == "wake-up":
            return Closed(
                "waking up", stage, f"Stage {stage} is waking up; retry once the wake-up completes{then_resume}"
            )
        return Closed("going to sleep", stage, f"Stage {stage} is going to sleep; wake it with POST /v1/omni/wakeup")
    if state.level2:
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
    if state.paused:
        stage = first_stage(state.paused_stages)
        return Closed("paused", stage, "Generation is paused: it resumes after resume_generation (POST /resume)")
    return None


def refusal(state: Closed | None) -> Exception:
    """The 503 a request gets while admission is closed (`state`), with `Retry-After`."""
    from omni_errors.semantics.core_table import unavailable_record
    from omni_errors.semantics.exceptions import OmniServerError

    if state is None:  # reopened since: the request may simply be retried
        state = Closed("paused", 0, "Generation was paused; retry")
    refused = OmniServerError.from_details(unavailable_record(state.message, stage_id=state.stage_id))
    return retry_later(refused, RETRY_AFTER_S)


def health_state(gate: object) -> dict[str, Any]:
    """What `/health`'s 200 body says of a server whose `_pause_cond` is `gate`: nothing while it
    admits requests (or its condition is not an `AdmissionGate`), else its state (`status`), vLLM's
    `is_sleeping` and `is_paused`, the stage and how to leave the state."""
    if not isinstance(gate, AdmissionGate):
        return {}
    values = gate.state()
    state = closed(values, gate.transition)
    if state is None:
        return {}
    return {
        "status": state.state,
        "is_sleeping": values.sleeping,
        "is_paused": values.paused,
        "stage_id": state.stage_id,
        "message": state.message,
    }


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


def _stages(stage_ids: Any, stage_count: int) -> tuple[int, ...] | None:
    """The stages a transition names (None: every stage), or None when `stage_ids` is not a list of
    ids (vLLM-Omni's own validation answers it)."""
    try:
        return tuple(range(stage_count)) if stage_ids is None else tuple(stage_ids)
    except TypeError:
        return None


def _asleep(state: AdmissionState, stages: tuple[int, ...]) -> bool:
    """Whether any of `stages` is asleep in `state`."""
    return any(stage in state.asleep_stages for stage in stages) or (not state.asleep_stages and state.sleeping)


Saved = TypeVar("Saved")


async def all_or_nothing(
    gate: AdmissionGate,
    verb: Literal["sleep", "wake-up"],
    stage_ids: Any,
    transition: Awaitable[Any],
    *,
    stage_count: int,
    save: Callable[[], Saved],
    restore: Callable[[Saved], Awaitable[None]],
) -> Any:
    """Await `transition`, the server's sleep or wake-up of `stage_ids` (None: each of its
    `stage_count` stages), all or nothing (the module docstring says how); returns its acks.
    `save` copies the server's admission and sleep fields before, `restore` puts them back."""
    from omni_errors.semantics.exceptions import OmniNotImplementedError

    stages = _stages(stage_ids, stage_count)
    saved, before = save(), gate.state()
    gate.transition = (verb, stages or ())
    try:
        try:
            acks = await transition
        except BaseException:
            await restore(saved)
            raise
        finally:
            gate.transition = None
    except NotImplementedError as exc:
        if verb != "wake-up":
            raise
        # vLLM-Omni 0.30 cannot wake a level-2 sleep.
        state = gate.closed()
        stage = state.stage_id if state is not None else 0
        raise OmniNotImplementedError(
            f"Stage {stage} slept at level 2 (its weights were discarded) and vLLM-Omni cannot wake it: "
            "restart the server",
            stage_id=stage,
        ) from exc
    if stages is None:
        return acks
    if not stages:  # no stage was named: a transition of nothing changes nothing
        await restore(saved)
        return acks
    # A wake-up of stages already awake answers no acks; vLLM-Omni says so ("SKIPPED" at the route).
    if verb == "wake-up" and not acks and not _asleep(before, stages):
        return acks
    failure = _failure(verb, stages, list(acks or []))
    if failure is not None:
        await restore(saved)
        raise failure
    return acks
