"""The plugin's own settings by name (the ones an operator sets, and the logger it writes to). The
numbers every server reads (`OMNI_ERRORS_MAX_BODY_BYTES`, `OMNI_ERRORS_ANSWER_DEADLINE_S`,
`OMNI_ERRORS_ADMISSION_WAIT_S`, `OMNI_ERRORS_RETRY_AFTER_S`, `OMNI_ERRORS_REJOIN_WINDOW_S`,
`OMNI_ERRORS_STEP_DEADLINE_S`) are the core's, in one table: `omni_errors.settings`.

Here so that a process that sets none of them imports nothing to find out (`register()` runs in
every process vLLM loads plugins in).
"""

from __future__ import annotations

__all__ = [
    "KEYS_ENV",
    "LOG_NAME",
]

#: The plugin's logger, under vLLM's: vLLM gives its `vllm` logger a handler in every process it
#: starts, so the plugin's lines are printed beside vLLM's own, in its format.
LOG_NAME = "vllm.omni_errors"

#: A directory of `omni-errors keys` files: CURVE with a ZAP allow-list on every TCP socket of the
#: deployment (`sockets`).
KEYS_ENV = "OMNI_ERRORS_VLLM_OMNI_KEYS"
