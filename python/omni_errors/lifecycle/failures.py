"""Which failures end a stage, and the record a stage reports for a failure.

Both questions are answered by the classification table: a failure is fatal when its row is
(`Rule.fatal`: OOM, InductorError, EngineDeadError, ...), searched along the exception and its
`__cause__`/`__context__` chain, so an OOM wrapped in a RuntimeError by a library (seed 003) is
still an OOM. Messages are never inspected.

`omni_errors.classification` imports vLLM, fastapi and jinja2 (15-60 s on these machines), so a
stage uses the full table only when vLLM is already loaded there (a real vLLM stage pays nothing
more); a torch-only stage uses the vLLM-free core the full table extends
(`omni_errors.core_table`), whose torch rows are looked up in `sys.modules`, never imported.
"""

from __future__ import annotations

import sys

from omni_errors import OmniErrorDetails
from omni_errors.core_table import CORE, OUT_OF_MEMORY, fatal_record
from omni_errors.lifecycle.exitcodes import ExitCode
from omni_errors.rules import RuleTable

__all__ = ["classify_failure", "fatal_cause"]

_CHAIN_DEPTH = 8


def _table() -> RuleTable:
    """The full table where vLLM is loaded (importing it then costs little), else the core."""
    if "vllm" in sys.modules:
        try:
            from omni_errors.classification import TABLE
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
    exc: BaseException, *, request_id: str | None, stage_id: int, fatal: bool = False
) -> OmniErrorDetails:
    """The record for `exc` in a stage; `fatal=True` forces the canonical fatal record."""
    details = _table().classify(exc, request_id=request_id, stage_id=stage_id)
    if details.stage_id is None:
        details = details.replace(stage_id=stage_id)
    if fatal and not (details.fatal and details.category == "server"):
        details = fatal_record(stage_id=stage_id, request_id=request_id)
    return details
