"""`classify`: exception -> `OmniErrorDetails`, by the core table extended with vLLM's hierarchy and the Omni types.

`TABLE` is `omni_errors.semantics.core_table.CORE` with `omni_errors.semantics.vllm_rows.ROWS` in front of it,
their classes imported here, most specific first;
`classify()` takes the first class of `type(exc).__mro__` that has a row (`omni_errors.semantics.rules`), so a
subclass inherits its parent's row until it gets its own. The same table produces the error
catalogue (`omni_errors.semantics.catalog`, `docs/errors.md`).

Importing this module imports vLLM (the rows name its classes); `import omni_errors` alone does not,
nor does reading the rows (`vllm_rows`).
"""

from __future__ import annotations

from collections.abc import Mapping

from omni_errors._native import OmniErrorDetails
from omni_errors.semantics.core_table import CORE
from omni_errors.semantics.rules import LazyClass, Rule
from omni_errors.semantics.vllm_rows import ROWS

__all__ = ["RULES", "TABLE", "classify", "rule_for"]


# A lazy row stays lazy (its module may be absent); every other class is imported now.
TABLE = CORE.extend([(cls if isinstance(cls, LazyClass) else cls.load(), rule) for cls, rule in ROWS])
RULES: Mapping[type[BaseException] | LazyClass, Rule] = dict(TABLE.rows)
"""The classification table, in catalogue order (most specific first)."""


def rule_for(cls: type[BaseException], *, raw_fallbacks: bool = True, stage_known: bool = False) -> Rule:
    """The first rule along `cls.__mro__`, skipping fallback rows when they are off."""
    return TABLE.lookup(cls, raw_fallbacks=raw_fallbacks, stage_known=stage_known)


def classify(
    exc: BaseException,
    *,
    request_id: str | None = None,
    stage_id: int | None = None,
    raw_fallbacks: bool = True,
) -> OmniErrorDetails:
    """The canonical record of `exc`.

    Args:
        exc: any exception.
        request_id: the request it failed, if known; kept unless the record already has one.
        stage_id: the stage it came from, if known; an id the exception carries takes precedence.
            Passing it also marks a raw `asyncio.TimeoutError` as a stage deadline (504).
        raw_fallbacks: vLLM's migration fallback for raw `ValueError`/`TypeError`/`OverflowError`
            (400) and `NotImplementedError` (501), on by default as in vLLM 0.33; off, they are
            unknown failures (500). Each boundary passes its own (`install(app, raw_fallbacks=...)`).

    Returns:
        A validated, sanitized record. Unknown exceptions are server 500; this never raises for a
        well-formed `exc`, whatever its text.
    """
    return TABLE.classify(exc, request_id=request_id, stage_id=stage_id, raw_fallbacks=raw_fallbacks)
