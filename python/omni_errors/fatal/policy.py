"""Which failures end a stage, the record a stage reports for a failure, and the one fatal policy.

Both questions are answered by the classification table: a failure is fatal when its row is
(`Rule.fatal`: OOM, InductorError, EngineDeadError, ...), searched along the exception and its
`__cause__`/`__context__` chain, so an OOM wrapped in a RuntimeError by a library (seed 003) is
still an OOM. Messages are never inspected.

The fatal policy (`FatalState`, `PRECEDENCE`, `canonical_fatal`) is what the reference supervisor
and the vLLM-Omni plugin both use when a pipeline dies: the first fatal failure's record is kept
(in its canonical form, built here once), and the process's exit code is the one of highest
precedence among the fatal failures it saw, so a cause reported after its consequence still wins.

`omni_errors.semantics.classification` imports vLLM, fastapi and jinja2 (15-60 s on these machines), so a
stage uses the full table only when vLLM is already loaded there (a real vLLM stage pays nothing
more); a torch-only stage uses the vLLM-free core the full table extends
(`omni_errors.semantics.core_table`), whose torch rows are looked up in `sys.modules`, never imported.
"""

from __future__ import annotations

import sys
import threading

from omni_errors import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import CORE, OUT_OF_MEMORY, fatal_record
from omni_errors.semantics.rules import RuleTable

__all__ = ["PRECEDENCE", "FatalState", "canonical_fatal", "classify_failure", "fatal_cause"]

_CHAIN_DEPTH = 8


def _table() -> RuleTable:
    """The full table where vLLM is loaded (importing it then costs little), else the core."""
    if "vllm" in sys.modules:
        try:
            from omni_errors.semantics.classification import TABLE
        except Exception:  # omni-errors: ignore[OE202]: the classifier must never turn a failure into a second failure
            return CORE
        return TABLE
    return CORE


def fatal_cause(exc: BaseException) -> tuple[BaseException, ExitCode] | None:
    """The first exception in `exc`'s chain that is fatal by type, with the exit code it implies.

    OOM anywhere in the chain wins over the other fatal types (its exit code is more specific).
    """
    table = _table()
    oom = OUT_OF_MEMORY.resolve()
    hit: tuple[BaseException, ExitCode] | None = None
    seen: set[int] = set()
    cur: BaseException | None = exc
    for _ in range(_CHAIN_DEPTH):
        if cur is None or id(cur) in seen:
            break
        seen.add(id(cur))
        if oom is not None and isinstance(cur, oom):
            return cur, ExitCode.OOM
        if hit is None and table.lookup(type(cur)).fatal:
            hit = cur, ExitCode.FATAL_ENGINE
        cur = cur.__cause__ or cur.__context__
    return hit


def classify_failure(
    exc: BaseException, *, request_id: str | None, stage_id: int | None, fatal: bool = False
) -> OmniErrorDetails:
    """The record of `exc` raised in a stage: the one rule, for the reference lifecycle and for
    vLLM-Omni (`omni_errors.carry.stage_failure`) alike. No raw fallback: a raw `ValueError`,
    `TypeError` or `OverflowError` raised in a stage is the server's failure (500); only an explicit
    client-error type is a 4xx (the RFC's answer once the fallbacks go). The API process's boundary
    keeps its own switch for what it raises itself (`install(app, raw_fallbacks=...)`).
    `fatal=True` forces the canonical fatal record."""
    details = _table().classify(exc, request_id=request_id, stage_id=stage_id, raw_fallbacks=False)
    if details.stage_id is None and stage_id is not None:
        details = details.replace(stage_id=stage_id)
    if fatal and not (details.fatal and details.category == "server"):
        details = fatal_record(stage_id=details.stage_id, request_id=request_id)
    return details


#: Which exit code wins when a process sees several fatal failures: the first listed. A stage
#: that failed to start is reported as such (nothing was served); otherwise the most specific
#: cause wins over its consequences: an OOM over the engine failure it caused, a reported engine
#: failure over a hung or disconnected stage, and all of them over a stage that merely vanished.
PRECEDENCE: tuple[ExitCode, ...] = (
    ExitCode.STARTUP_FAILURE,
    ExitCode.OOM,
    ExitCode.FATAL_ENGINE,
    ExitCode.STAGE_HUNG,
    ExitCode.BROKEN_IPC,
    ExitCode.LINK_LOST,
    ExitCode.STAGE_LOST,
)


def _rank(code: ExitCode) -> int:
    return PRECEDENCE.index(code) if code in PRECEDENCE else len(PRECEDENCE)


def canonical_fatal(details: OmniErrorDetails, *, starting: bool = False) -> OmniErrorDetails:
    """The record every in-flight request of a dead pipeline gets: `details` when it already is a
    fatal server record, else the canonical fatal record of its stage. While starting, its message
    is the root cause (no client reads it: the supervisor raises `StageStartupError`)."""
    if details.fatal and details.category == "server":
        return details
    return fatal_record(stage_id=details.stage_id, root_cause=details.message if starting else None)


class FatalState:
    """A process's fatal failure: the first record, in canonical form, and the exit code that wins.

    Thread-safe: the vLLM-Omni plugin declares from the orchestrator's thread and the API server's
    loop; the supervisor from its loop.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._record: OmniErrorDetails | None = None
        self._code: ExitCode | None = None

    @property
    def record(self) -> OmniErrorDetails | None:
        """The canonical record of the first fatal failure, or None."""
        with self._lock:
            return self._record

    @property
    def exit_code(self) -> ExitCode | None:
        """The exit code the process must end with, or None when nothing fatal happened."""
        with self._lock:
            return self._code

    def note(self, code: ExitCode) -> ExitCode:
        """Take `code` into account (an OOM seen before the pipeline ends, say); returns the winner."""
        with self._lock:
            return self._note(code)

    def _note(self, code: ExitCode) -> ExitCode:
        if self._code is None or _rank(code) < _rank(self._code):
            self._code = code
        return self._code

    def declare(self, details: OmniErrorDetails, code: ExitCode, *, starting: bool = False) -> bool:
        """Record a fatal failure; True the first time. `starting`: the pipeline was starting (its
        exit code is then `STARTUP_FAILURE`)."""
        with self._lock:
            first = self._record is None
            if first:
                self._record = canonical_fatal(details, starting=starting)
            self._note(ExitCode.STARTUP_FAILURE if starting else code)
            return first

    def reset(self) -> None:
        """Forget everything (the plugin being switched off in a process)."""
        with self._lock:
            self._record, self._code = None, None
