"""Numbers an operator sets through the environment (seconds, bytes), read once where they are used."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable

__all__ = ["number_from_env"]

_log = logging.getLogger("omni_errors")


def number_from_env(name: str, default: float, valid: Callable[[float], bool], wanted: str) -> float:
    """The number the environment variable `name` sets, else `default`. A value that is not a finite
    number, or that `valid` refuses, is logged as an error (naming `wanted`) and ignored."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and valid(value)):
        _log.error("omni-errors: %s=%r is not %s; using %g", name, raw, wanted, default)
        return default
    return value
