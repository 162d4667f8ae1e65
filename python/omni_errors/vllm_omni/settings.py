"""The plugin's settings by name: the ones an operator sets (environment variables, read
once per process), and the logger it writes to.

Here so that a process that sets none of them imports nothing to find out (`register()` runs in
every process vLLM loads plugins in).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable

__all__ = [
    "ADMISSION_WAIT_ENV",
    "ANSWER_DEADLINE_ENV",
    "DEFAULT_MAX_BODY_BYTES",
    "KEYS_ENV",
    "LOG_NAME",
    "MAX_BODY_ENV",
    "RETRY_AFTER_ENV",
    "WINDOW_ENV",
    "max_body_bytes",
    "number_from_env",
]

#: The plugin's logger, under vLLM's: vLLM gives its `vllm` logger a handler in every process it
#: starts, so the plugin's lines are printed beside vLLM's own, in its format.
LOG_NAME = "vllm.omni_errors"

#: A directory of `omni-errors keys` files: CURVE with a ZAP allow-list on every TCP socket of the
#: deployment (`sockets`).
KEYS_ENV = "OMNI_ERRORS_VLLM_OMNI_KEYS"
#: Seconds a stage without replicas waits for one to register before the head ends (`distributed`).
WINDOW_ENV = "OMNI_ERRORS_REJOIN_WINDOW_S"
#: Seconds a generation request waits for a paused or sleeping engine to admit it before its 503
#: (`admission`).
ADMISSION_WAIT_ENV = "OMNI_ERRORS_ADMISSION_WAIT_S"
#: The `Retry-After` (whole seconds) of that 503 (`admission`).
RETRY_AFTER_ENV = "OMNI_ERRORS_RETRY_AFTER_S"
#: Seconds a fatal stop waits for the answers of the requests in flight to be written (`api`).
ANSWER_DEADLINE_ENV = "OMNI_ERRORS_ANSWER_DEADLINE_S"
#: The bytes of request body the API server reads before it answers 413 (`api`, `max_body_bytes`).
MAX_BODY_ENV = "OMNI_ERRORS_MAX_BODY_BYTES"
#: Its default: room for the largest media vLLM fetches (`VLLM_MAX_MEDIA_DOWNLOAD_SIZE_MB`, 256 MiB)
#: sent inline, base64.
DEFAULT_MAX_BODY_BYTES = 512 * 2**20


def number_from_env(name: str, default: float, valid: Callable[[float], bool], wanted: str) -> float:
    """The number (seconds, bytes) the environment variable `name` sets, else `default`. A value that is
    not a finite number, or that `valid` refuses, is logged as an error (naming `wanted`) and ignored."""
    raw = os.environ.get(name)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and valid(value)):
        logging.getLogger(LOG_NAME).error("omni-errors: %s=%r is not %s; using %g", name, raw, wanted, default)
        return default
    return value


def max_body_bytes() -> int:
    """The request body limit this process serves with (`MAX_BODY_ENV`, else `DEFAULT_MAX_BODY_BYTES`)."""
    wanted = "a whole number of bytes, at least 1"
    return int(number_from_env(MAX_BODY_ENV, DEFAULT_MAX_BODY_BYTES, lambda v: v >= 1 and v.is_integer(), wanted))
