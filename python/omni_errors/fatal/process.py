"""The process's fatal state and who to tell: the one fatal policy, held once per process.

Every process of a vLLM-Omni server has one (API process, StageDiffusionProc, workers), whether the
calls come from vLLM-Omni itself (the upstream series) or from the plugin's patches: code that
recognises a fatal failure calls `declare` (or `note`, when it only sees the failure's type; or
`end_pipeline`, the orchestrator, which also answers its in-flight requests with the record); the
parts that end the process subscribe with `on_fatal` (the API server's stop, the orchestrator's
pipeline shutdown) and read `exit_code()` when the process ends. A fatal record answered to a client
ends the process through `answered`, unless its stages decide when it ends (`defer_to_stages`: a
multi-node head, whose lost replica may still be replaced). Which record is kept and which
exit code wins is decided by `omni_errors.fatal.policy.FatalState`, as in the reference supervisor:
the first failure is the root cause, and a more specific code seen later (an OOM after the engine
died) still wins.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from omni_errors._native import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.fatal.policy import FatalState, canonical_fatal
from omni_errors.semantics.ids import with_request_id

__all__ = [
    "answered",
    "declare",
    "declared",
    "defer_to_stages",
    "end_pipeline",
    "exit_code",
    "note",
    "on_fatal",
    "reset",
    "stages_decide",
]

_log = logging.getLogger(__name__)

Callback = Callable[[OmniErrorDetails], None]

_state = FatalState()
_lock = threading.Lock()
_callbacks: list[Callback] = []
_stages_decide = False


def note(code: ExitCode) -> ExitCode:
    """Take the exit code a fatal failure seen here implies into account, without ending anything
    yet; returns the code that wins so far.

    The part of the process that saw the failure's type (an OOM in a worker, say) is rarely the
    one that ends the pipeline; this keeps the specific code for when it does.
    """
    return _state.note(code)


def declare(details: OmniErrorDetails, code: ExitCode) -> bool:
    """Record a fatal failure; returns True the first time (the callbacks run then, once)."""
    with _lock:
        first = _state.declare(details, code)
        callbacks = list(_callbacks) if first else []
    record, winner = _state.record, _state.exit_code
    if first and record is not None and winner is not None:
        _log.critical(
            "omni-errors: fatal failure in stage %s (%s %s); ending the pipeline with exit code %d",
            record.stage_id,
            record.status_code,
            record.error_type,
            winner,
        )
        for callback in callbacks:
            try:
                callback(record)
            except Exception:  # one subscriber failing must not stop the others
                _log.exception("omni-errors: fatal-failure callback failed")
    return first


def end_pipeline(
    details: OmniErrorDetails, code: ExitCode, request_ids: Iterable[str]
) -> list[OmniErrorDetails] | None:
    """A fatal failure ends the pipeline: declare it, and return the record each in-flight request of
    `request_ids` is answered with (its canonical fatal record). None when the pipeline had already
    ended: its first failure stands, with its exit code, and its requests were answered then."""
    if declared() is not None:
        return None
    details = canonical_fatal(details)
    # Declared before any request is answered: the API process renders those answers as fatal, and
    # the cause decided here (a lost stage, say) must be the exit code, not their echo.
    declare(details, code)
    return [with_request_id(details, request_id) for request_id in request_ids]


def answered(details: OmniErrorDetails) -> None:
    """A fatal record reached a client (the API server's `on_fatal` hook): it ends the process with
    `FATAL_ENGINE`, unless the process already knows why it ends (that decision's record and exit
    code stand, and this record is its answer) or its stages decide (`defer_to_stages`)."""
    if not _stages_decide and declared() is None:
        declare(details, ExitCode.FATAL_ENGINE)


def defer_to_stages() -> None:
    """From now on a fatal record answered to a client does not end the process by itself: the
    stage it concerns decides (a multi-node head, whose lost replica may rejoin within its window)."""
    global _stages_decide
    _stages_decide = True


def stages_decide() -> bool:
    """Whether this process's stages decide when it ends (`defer_to_stages` was called)."""
    return _stages_decide


def declared() -> OmniErrorDetails | None:
    """The first fatal record of this process (canonical), if any."""
    return _state.record


def exit_code() -> ExitCode | None:
    """The documented exit code this process must end with, or None when nothing fatal happened."""
    return _state.exit_code


def on_fatal(callback: Callback) -> None:
    """Call `callback(details)` on the first fatal failure (at once if it already happened)."""
    with _lock:
        record = _state.record
        if record is None:
            _callbacks.append(callback)
            return
    callback(record)


def reset() -> None:
    """Forget the state and the subscribers (the plugin's `unapply`, tests)."""
    global _stages_decide
    with _lock:
        _stages_decide = False
        _state.reset()
        _callbacks.clear()
