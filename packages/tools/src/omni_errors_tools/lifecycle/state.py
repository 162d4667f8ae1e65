"""The supervisor's states and the one function that moves between them.

```
NEW ──► STARTING ──► RUNNING ──► DRAINING ──► STOPPING ──► STOPPED
            │   └──────────┴──────────┴──────────►┘
            └────────┴──────────┴──────────┴──────────► DEAD   (a fatal event: terminal)
```
A failure while already stopping or stopped changes nothing (the stages are going away anyway):
`transition` answers False and the caller does nothing, which is how late events (a stage's exit
during a clean stop, a second fatal frame) are ignored without a check at every call site.
"""

from __future__ import annotations

import enum

__all__ = ["State", "transition"]


class State(str, enum.Enum):
    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    DRAINING = "draining"  # SIGTERM: in-flight requests may finish, new ones are refused
    STOPPING = "stopping"  # stages are being stopped after a clean request to stop
    DEAD = "dead"  # a fatal event: every request answered, stages stopped, exit code set
    STOPPED = "stopped"  # stopped cleanly: stages gone, resources released

    @property
    def serving(self) -> bool:
        """New requests are accepted."""
        return self is State.RUNNING

    @property
    def live(self) -> bool:
        """A failure in this state kills the pipeline (it is not already stopping)."""
        return self in (State.STARTING, State.RUNNING, State.DRAINING)


_ALLOWED: dict[State, frozenset[State]] = {
    State.NEW: frozenset({State.STARTING, State.STOPPED}),
    State.STARTING: frozenset({State.RUNNING, State.STOPPING, State.DEAD}),
    State.RUNNING: frozenset({State.DRAINING, State.STOPPING, State.DEAD}),
    State.DRAINING: frozenset({State.STOPPING, State.DEAD}),
    State.STOPPING: frozenset({State.STOPPED}),
    State.DEAD: frozenset(),
    State.STOPPED: frozenset(),
}


def transition(current: State, target: State) -> bool:
    """Whether `current -> target` is a move the supervisor makes (see the diagram)."""
    return target in _ALLOWED[current]
