"""The plugin's settings by name: the ones an operator sets (environment variables, read
once per process, `omni_errors.env.number_from_env`), and the logger it writes to. The API
server's own (`OMNI_ERRORS_MAX_BODY_BYTES`, `OMNI_ERRORS_ANSWER_DEADLINE_S`,
`OMNI_ERRORS_ADMISSION_WAIT_S`, `OMNI_ERRORS_RETRY_AFTER_S`) and a multi-node head's
(`OMNI_ERRORS_REJOIN_WINDOW_S`) are the core's (`omni_errors.server.vllm_api`,
`omni_errors.server.fatal_stop`, `omni_errors.server.admission`, `omni_errors.server.rejoin`).

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
