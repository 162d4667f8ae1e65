"""The records the supervisor answers with when it refuses a request or cannot pass it on.

Built from the core table's rules (`core_table.unavailable_record`, `stage_failure_record`), so
their shapes stay in one place; the supervisor only chooses which applies.
"""

from __future__ import annotations

from omni_errors import OmniErrorDetails
from omni_errors.semantics.core_table import stage_failure_record, unavailable_record
from omni_errors_tools.lifecycle.links import LinkRefusedError, Refusal

__all__ = ["overloaded", "shutting_down", "unpassable"]


def shutting_down() -> OmniErrorDetails:
    """503: the pipeline is stopping; a request still in flight or arriving now gets this."""
    return unavailable_record("The server is shutting down", stage_id=None)


def overloaded(stage_id: int | None, request_id: str, exc: LinkRefusedError | None = None) -> OmniErrorDetails:
    """503: a bounded queue is full (the in-flight limit, a link's high-water mark), or the remote
    stage's connection is down (its deadline then decides whether the stage is lost)."""
    what = "The pipeline" if stage_id is None else f"Stage {stage_id}"
    state = exc.refusal.value if exc is not None else Refusal.FULL.value
    return unavailable_record(f"{what} is {state}; retry later", stage_id=stage_id, request_id=request_id)


def unpassable(stage_id: int, request_id: str) -> OmniErrorDetails:
    """500: an output that the next stage's link cannot carry (a pipeline defect, not the client's)."""
    message = f"The request could not be passed to stage {stage_id}"
    return stage_failure_record(stage_id=stage_id, request_id=request_id, message=message)
