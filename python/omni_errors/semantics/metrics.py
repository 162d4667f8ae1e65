"""`omni_errors_total{category,error_type,status,stage_id,fatal}`: every error rendered to a client.

Counted once, where the error leaves the process, by `omni_errors.semantics.reporting.report`: the server
handlers (non-streaming HTTP), the SSE and WebSocket terminal events, and async jobs when their
failure is stored. `stage_id` is "" when
the failure has no stage. The counter lives in prometheus-client's default registry, the one vLLM's
`get_prometheus_registry()` returns outside multiprocess mode, so vLLM's `/metrics` exposes it.
"""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry, Counter

from omni_errors._native import OmniErrorDetails

__all__ = ["LABELS", "errors_total", "observe"]

LABELS = ("category", "error_type", "status", "stage_id", "fatal")

_lock = threading.Lock()
_counters: dict[int, Counter] = {}


def errors_total(registry: CollectorRegistry | None = None) -> Counter:
    """The counter in `registry` (default: prometheus-client's global one), created on first use."""
    registry = REGISTRY if registry is None else registry
    with _lock:
        counter = _counters.get(id(registry))
        if counter is None:
            counter = Counter(
                "omni_errors",
                "Errors rendered to clients, by canonical category, type, status, stage and fatality.",
                LABELS,
                registry=registry,
            )
            _counters[id(registry)] = counter
        return counter


def observe(details: OmniErrorDetails, registry: CollectorRegistry | None = None) -> None:
    """Count one error that is being rendered."""
    errors_total(registry).labels(
        category=details.category,
        error_type=details.error_type,
        status=str(details.status_code),
        stage_id="" if details.stage_id is None else str(details.stage_id),
        fatal="true" if details.fatal else "false",
    ).inc()
