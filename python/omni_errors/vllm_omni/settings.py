"""The multi-node settings an operator sets, by name (environment variables, read once per process).

Here so that a process that sets none of them imports nothing to find out (`register()` runs in
every process vLLM loads plugins in).
"""

from __future__ import annotations

__all__ = ["KEYS_ENV", "WINDOW_ENV"]

#: A directory of `omni-errors keys` files: CURVE with a ZAP allow-list on every TCP socket of the
#: deployment (`sockets`).
KEYS_ENV = "OMNI_ERRORS_VLLM_OMNI_KEYS"
#: Seconds a stage without replicas waits for one to register before the head ends (`distributed`).
WINDOW_ENV = "OMNI_ERRORS_REJOIN_WINDOW_S"
