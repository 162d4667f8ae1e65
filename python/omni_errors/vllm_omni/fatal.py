"""The process's fatal state: the first fatal record it saw, the exit code it implies, who to tell.

Every process of a vLLM-Omni server has one (API process, StageDiffusionProc, workers). A patch
that recognises a fatal failure calls `declare`; the parts that end the process subscribe with
`on_fatal` (the API server's stop, the orchestrator's pipeline shutdown) and read `exit_code()`
when the process ends. Declaring twice keeps the first record and the most specific exit code
(an OOM seen later still turns 80 into 81): the first failure is the root cause, later ones are
its consequences.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from omni_errors._native import OmniErrorDetails
from omni_errors.lifecycle.exitcodes import ExitCode

__all__ = ["declare", "declared", "exit_code", "note", "on_fatal", "reset"]

_log = logging.getLogger("omni_errors.vllm_omni")

Callback = Callable[[OmniErrorDetails], None]

_lock = threading.Lock()
_record: OmniErrorDetails | None = None
_code: ExitCode | None = None
_callbacks: list[Callback] = []


def _upgrade(code: ExitCode) -> None:
    global _code
    if _code is None or (code is ExitCode.OOM and _code is not ExitCode.OOM):
        _code = code


def note(code: int) -> None:
    """Remember the exit code a fatal failure seen here implies, without ending anything yet.

    The part of the process that saw the failure's type (an OOM in a worker, say) is rarely the
    one that ends the pipeline; this keeps the specific code for when it does.
    """
    with _lock:
        _upgrade(ExitCode(code))


def declare(details: OmniErrorDetails, code: ExitCode) -> bool:
    """Record a fatal failure; returns True the first time (the callbacks run then, once)."""
    global _record
    with _lock:
        first = _record is None
        if first:
            _record = details
        _upgrade(code)
        code = _code if _code is not None else code
        callbacks = list(_callbacks) if first else []
    if first:
        _log.critical(
            "omni-errors: fatal failure in stage %s (%s %s); ending the pipeline with exit code %d",
            details.stage_id,
            details.status_code,
            details.error_type,
            int(code),
        )
    for callback in callbacks:
        try:
            callback(details)
        except Exception:  # one subscriber failing must not stop the others
            _log.exception("omni-errors: fatal-failure callback failed")
    return first


def declared() -> OmniErrorDetails | None:
    """The first fatal record of this process, if any."""
    with _lock:
        return _record


def exit_code() -> ExitCode | None:
    """The documented exit code this process must end with, or None when nothing fatal happened."""
    with _lock:
        return _code


def on_fatal(callback: Callback) -> None:
    """Call `callback(details)` on the first fatal failure (at once if it already happened)."""
    with _lock:
        record = _record
        if record is None:
            _callbacks.append(callback)
            return
    callback(record)


def reset() -> None:
    """Forget the state (for tests that drive several pipelines in one process)."""
    global _record, _code
    with _lock:
        _record, _code = None, None
        _callbacks.clear()
