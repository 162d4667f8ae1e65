"""The pipeline's stages as links, and what they share: the shm status board and the link server.

`StageSet.open` makes one link per spec (a child process for a `StageSpec`, an expected remote
session for a `RemoteStageSpec`) and registers an interpreter-exit finalizer that runs the kill
path if the owner never releases them; `release` closes everything exactly once. The supervisor
decides when; this module only owns the resources.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from multiprocessing.util import Finalize
from typing import TYPE_CHECKING

from omni_errors_tools.lifecycle.channels import StatusBoard
from omni_errors_tools.lifecycle.engine import RemoteStageSpec, StageSpec
from omni_errors_tools.lifecycle.links import LinkListener, StageLink
from omni_errors_tools.lifecycle.local import LocalStageLink
from omni_errors_tools.lifecycle.stopping import emergency_stop
from omni_errors_tools.lifecycle.supervisor_types import LifecycleConfig

if TYPE_CHECKING:
    from omni_errors_tools.lifecycle.remote.config import LinkConfig
    from omni_errors_tools.lifecycle.remote.supervisor_side import LinkServer, LinkStats

__all__ = ["StageSet"]


class StageSet:
    def __init__(
        self, specs: Sequence[StageSpec | RemoteStageSpec], config: LifecycleConfig, link: LinkConfig | None
    ) -> None:
        if link is None and any(isinstance(s, RemoteStageSpec) for s in specs):
            why = "remote stages need a link: Supervisor(..., link=LinkConfig(...))"
            raise ValueError(why)  # omni-errors: ignore[OE101]: a caller's wrong configuration
        self.specs = list(specs)
        self.links: list[StageLink] = []
        self._config = config
        self._link_config = link
        self._board: StatusBoard | None = None
        self._server: LinkServer | None = None
        self._finalizer: Finalize | None = None

    @property
    def shm_names(self) -> list[str]:
        return [self._board.name] if self._board is not None else []

    @property
    def link_stats(self) -> LinkStats | None:
        return self._server.stats if self._server is not None else None

    async def open(self, owner: object, listener: LinkListener) -> None:
        """Create the shared resources, then each link in turn (`self.links` grows as they open)."""
        cfg = self._config
        if any(isinstance(s, StageSpec) for s in self.specs):
            self._board = StatusBoard.create(len(self.specs), cfg.shm_prefix)
        if self._link_config is not None and any(isinstance(s, RemoteStageSpec) for s in self.specs):
            from omni_errors_tools.lifecycle.remote.supervisor_side import LinkServer

            self._server = LinkServer(self._link_config, cfg)
        # Runs if `owner` is collected or the interpreter exits before `release` (exitpriority
        # 100: before multiprocessing joins its children, which would wait forever for a hung one).
        self._finalizer = Finalize(
            owner, emergency_stop, args=(self.links, self._board, self._server, cfg.stop_timeout), exitpriority=100
        )
        ctx = multiprocessing.get_context("spawn")
        links: list[StageLink] = []
        remote: list[StageLink] = []
        for stage_id, spec in enumerate(self.specs):
            if isinstance(spec, StageSpec):
                assert self._board is not None
                links.append(LocalStageLink(stage_id, spec, ctx, self._board, cfg.worker()))
            else:
                assert self._server is not None
                remote.append(self._server.expect(stage_id, spec))
                links.append(remote[-1])
        # Every remote stage is expected, and has its listener, before the server reads a message:
        # a stage that connects while the local stages start would otherwise be refused as unknown.
        for link in remote:
            await link.open(listener)
        if self._server is not None:
            self._server.start()
        for link in links:
            self.links.append(link)
            if link not in remote:
                await link.open(listener)

    def release(self) -> None:
        """Close every link, the link server and the shm segment (after the kill path ran)."""
        for link in self.links:
            link.close()
        if self._server is not None:
            self._server.close()
        if self._board is not None:
            self._board.unlink()
        if self._finalizer is not None:
            self._finalizer.cancel()
