"""The supervisor's in-flight requests: where each one is, and its answer, given exactly once.

A request is in the table from `open` until it is answered: finished by the last stage, failed
(its own error, a deadline, the pipeline's death) or aborted. Whatever arrives for a request
that is no longer in the table, or for a stage it has already left, is dropped, so no request is
ever answered twice: not after a stage's late output, nor after a link came back.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from omni_errors import OmniErrorDetails
from omni_errors.semantics.ids import with_request_id
from omni_errors_tools.lifecycle.links import Output
from omni_errors_tools.lifecycle.supervisor_types import StageResult

__all__ = ["Requests"]

_END = object()


@dataclass
class _Request:
    request_id: str
    queue: asyncio.Queue[Any]
    stage: int = 0
    deadline: float | None = None  # loop.time()


class Requests:
    def __init__(self) -> None:
        self._live: dict[str, _Request] = {}
        self._streams: dict[str, asyncio.Queue[Any]] = {}
        self.answered = 0  # terminal answers given (finished or failed): one per request, ever
        self.late = 0  # reports for requests no longer in that stage or in flight, dropped

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._live

    def open(self, request_id: str, deadline: float | None) -> None:
        req = _Request(request_id, asyncio.Queue(), 0, deadline)
        self._live[request_id] = req
        self._streams[request_id] = req.queue

    async def stream(
        self, request_id: str, error_factory: Callable[[OmniErrorDetails], BaseException]
    ) -> AsyncIterator[StageResult]:
        queue = self._streams.pop(request_id, None)
        if queue is None:
            raise KeyError(f"unknown request id {request_id!r} (or already streamed)")
        while True:
            item = await queue.get()  # omni-errors: ignore[OE303]: the watchdog ends it (request_timeout, liveness)
            if item is _END:
                return
            if isinstance(item, OmniErrorDetails):
                raise error_factory(item)
            yield item

    def route(self, stage_id: int, outputs: Sequence[Output], *, emit: bool, last: bool) -> list[tuple[str, Any]]:
        """Deliver a stage's outputs; returns the (request_id, payload) pairs for the next stage."""
        forward: list[tuple[str, Any]] = []
        for request_id, payload, finished in outputs:
            req = self._live.get(request_id)
            if req is None or req.stage != stage_id:
                self.late += 1  # aborted or already answered
                continue
            if emit:
                req.queue.put_nowait(StageResult(request_id, stage_id, payload, finished))
            if finished:
                if last:
                    del self._live[request_id]
                    self.answered += 1
                    req.queue.put_nowait(_END)
                else:
                    req.stage += 1
                    forward.append((request_id, payload))
        return forward

    def fail(self, request_id: str, details: OmniErrorDetails, *, at_stage: int | None = None) -> bool:
        """Answer `request_id` with `details` (request id filled in); False if already answered,
        or, with `at_stage`, if the request is not in that stage (a late or stray report)."""
        req = self._live.get(request_id)
        if req is None or (at_stage is not None and req.stage != at_stage):
            self.late += 1
            return False
        del self._live[request_id]
        self.answered += 1
        req.queue.put_nowait(with_request_id(details, request_id))
        return True

    def fail_all(self, details: OmniErrorDetails) -> int:
        live, self._live = self._live, {}
        self.answered += len(live)
        for request_id, req in live.items():
            req.queue.put_nowait(with_request_id(details, request_id))
        return len(live)

    def at_stage(self, stage_id: int) -> list[str]:
        return [rid for rid, req in self._live.items() if req.stage == stage_id]

    def expired(self, now: float) -> Iterator[tuple[str, int]]:
        """(request_id, stage) of every request past its deadline at loop time `now`."""
        for rid, req in list(self._live.items()):
            if req.deadline is not None and now > req.deadline:
                yield rid, req.stage

    def abort(self, request_id: str) -> int | None:
        """End the request without an answer (its client left); returns the stage it was in."""
        req = self._live.pop(request_id, None)
        if req is None:
            return None
        self.answered += 1
        req.queue.put_nowait(_END)
        return req.stage
