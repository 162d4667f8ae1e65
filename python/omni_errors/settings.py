"""Every number an operator sets through the environment: its name, default, what a valid value is and
what it changes, in one table (`SETTINGS`; docs/vllm-omni.md's "Settings" is `markdown_table()`).

Each is read where it is used, when that module decides (`Setting.read`: at import for a value the
process keeps, at each call where a test or a tool changes it), and a value that is not valid is
logged as an error, naming the setting and what it wants, and the default is used: a typo never
stops a server, and is never silently dropped either.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "ADMISSION_WAIT",
    "ANSWER_DEADLINE",
    "MAX_BODY_BYTES",
    "REJOIN_WINDOW",
    "RETRY_AFTER",
    "SETTINGS",
    "STEP_DEADLINE",
    "Setting",
    "markdown_table",
]

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Setting:
    """One environment variable: `name`, its `default`, the values it takes (`valid`, said as `wanted`)."""

    name: str
    default: float
    valid: Callable[[float], bool]
    wanted: str
    meaning: str

    def read(self) -> float:
        """The value the environment sets, else the default (an invalid value is logged and ignored)."""
        raw = os.environ.get(self.name)
        if raw is None:
            return self.default
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and self.valid(value)):
            _log.error("omni-errors: %s=%r is not %s; using %g", self.name, raw, self.wanted, self.default)
            return self.default
        return value


def _seconds(minimum: float, *, inclusive: bool) -> Callable[[float], bool]:
    return (lambda v: v >= minimum) if inclusive else (lambda v: v > minimum)


ANSWER_DEADLINE = Setting(
    "OMNI_ERRORS_ANSWER_DEADLINE_S",
    3.0,
    _seconds(0, inclusive=False),
    "a positive number of seconds",
    "after a fatal failure, how long the API server waits for the answers of the requests in flight to be "
    "written before it stops",
)
ADMISSION_WAIT = Setting(
    "OMNI_ERRORS_ADMISSION_WAIT_S",
    0.5,  # long enough to pass over a pause that ends at once (a weight sync); no client waits on a sleep
    _seconds(0, inclusive=True),
    "a valid number of seconds",
    "how long a generation request waits for a paused or sleeping engine to admit it before its 503",
)
RETRY_AFTER = Setting(
    "OMNI_ERRORS_RETRY_AFTER_S",
    2.0,  # a restart, a replica joining or a queue draining takes seconds; a sooner retry only adds load
    _seconds(1, inclusive=True),
    "a valid number of seconds",
    "the `Retry-After` (whole seconds, rounded up) of a 503 whose failure does not say when to retry",
)
MAX_BODY_BYTES = Setting(
    "OMNI_ERRORS_MAX_BODY_BYTES",
    float(512 * 2**20),  # the largest media vLLM fetches (256 MiB) sent inline, base64
    lambda v: v >= 1 and v.is_integer(),
    "a whole number of bytes, at least 1",
    "the request body the API server reads before it answers 413",
)
REJOIN_WINDOW = Setting(
    "OMNI_ERRORS_REJOIN_WINDOW_S",
    120.0,
    _seconds(0, inclusive=False),
    "a positive number of seconds",
    "on a multi-node head, how long a stage left without a live replica waits for one to register (its "
    "requests 503) before the pipeline ends",
)
STEP_DEADLINE = Setting(
    "OMNI_ERRORS_STEP_DEADLINE_S",
    120.0,  # a long prefill, or torch compiling a shape it has not seen, fits
    _seconds(0, inclusive=True),
    "a number of seconds >= 0",
    "how long one step of an LLM stage's engine may run before the stage is hung and ends itself "
    "(exit 84); 0 turns the deadline off",
)

SETTINGS: tuple[Setting, ...] = (
    ANSWER_DEADLINE,
    ADMISSION_WAIT,
    RETRY_AFTER,
    MAX_BODY_BYTES,
    REJOIN_WINDOW,
    STEP_DEADLINE,
)


def markdown_table() -> str:
    """The settings as the docs hold them, between markers that say they are generated."""
    rows = [
        f"| `{s.name}` | {s.default:.0f} | {s.wanted} | {s.meaning} |"
        if s.default.is_integer()
        else f"| `{s.name}` | {s.default:g} | {s.wanted} | {s.meaning} |"
        for s in SETTINGS
    ]
    body = "\n".join(["| variable | default | takes | what it changes |", "|---|---:|---|---|", *rows])
    begin = "<!-- generated: settings, from omni_errors.settings (do not edit by hand) -->"
    return f"{begin}\n{body}\n<!-- end of settings -->\n"
