"""The supervisor's periodic checks: request deadlines, link deadlines and hung stages.

Every `watchdog_interval` seconds: requests past their deadline get 504 (and their stage is told
to abort them); each link's `poll` sends the heartbeats that are due and reports a remote stage
that missed its deadline; a stage whose loop has not turned for `heartbeat_timeout` has its
requests failed with 504, and after `hang_grace` more it is dead (exit 84). Failures go back to
the supervisor through `die`; the checks never wait on anything.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from omni_errors import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import fatal_record, timeout_record
from omni_errors_tools.lifecycle.links import StageLink
from omni_errors_tools.lifecycle.requests import Requests
from omni_errors_tools.lifecycle.supervisor_types import LifecycleConfig

__all__ = ["Watchdog"]

logger = logging.getLogger(__name__)

Die = Callable[[OmniErrorDetails, ExitCode, str], None]


class Watchdog:
    def __init__(self, config: LifecycleConfig, links: Sequence[StageLink], requests: Requests, die: Die) -> None:
        self._config = config
        self._links = links
        self._requests = requests
        self._die = die
        self._hung: dict[int, float] = {}  # stage id -> when its loop was first found silent

    def tick(self, loop_now: float, *, serving: bool) -> None:
        """One round of checks; `loop_now` is the loop's clock (request deadlines use it)."""
        for rid, stage in self._requests.expired(loop_now):
            timed_out = timeout_record(f"Request timed out in stage {stage}", stage_id=stage)
            if self._requests.fail(rid, timed_out):
                self._links[stage].abort(rid)
        now = time.monotonic()
        for link in self._links:
            link.poll(now)  # may report a missed link deadline: the supervisor dies
        if serving:  # a stage building its engine is not hung; startup_timeout covers it
            self._check_progress(now)

    def _check_progress(self, now: float) -> None:
        cfg = self._config
        for link in self._links:
            age = link.progress_age(now)
            hung_since = self._hung.get(link.stage_id)
            if age <= cfg.heartbeat_timeout:
                if hung_since is not None:
                    logger.warning("stage %d is answering again", link.stage_id)
                    del self._hung[link.stage_id]
                continue
            if hung_since is None:
                self._hung[link.stage_id] = now
                logger.error("stage %d: no heartbeat for %.1fs; failing its requests with 504", link.stage_id, age)
                silent = timeout_record(f"Stage {link.stage_id} stopped responding", stage_id=link.stage_id)
                for rid in self._requests.at_stage(link.stage_id):
                    self._requests.fail(rid, silent)
            elif now - hung_since > cfg.hang_grace:
                reason = f"stage {link.stage_id} stopped responding"
                self._die(fatal_record(stage_id=link.stage_id), ExitCode.STAGE_HUNG, reason)
                return
