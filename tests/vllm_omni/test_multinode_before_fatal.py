"""vLLM-Omni 0.30's multi-node mode as released (the plugin disabled at both ends): a fatal failure of
the only remote stage.

Its own head: vLLM-Omni races after the executor dies, and the head's orchestrator may block for
good in a send to the dead stage (seed 001 across hosts), which would wedge any case after it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from multinode import Deployment, deployment

STAGE_EXIT = 60.0


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    yield from deployment(tmp_path_factory, "offf", plugin=False)


def test_a_fatal_failure_is_answered_and_the_head_stays_up_without_a_replica(dep: Deployment) -> None:
    remote = dep.remotes[-1]
    assert dep.images("a cat [fault:fatal]").status_code == 500
    assert remote.wait_exit(STAGE_EXIT) in (0, 1)  # read before the replica is reaped: either, at random
    assert dep.get("/health").status_code == 503
    assert dep.head is not None and dep.head.proc.poll() is None
