"""The shape of a chaos scenario: a target, its faults, its load, and the endings it accepts.

A scenario is data. `load(ctx)` returns the calls to make (each an awaitable that returns how its
request ended, an `Outcome`) with the endings acceptable for each (`Expect`). The harness runs
the calls concurrently and checks every outcome, the exit code and what the server left behind.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from omni_errors_tools.chaos.loadgen import Outcome
from omni_errors_tools.chaos.target import Target

__all__ = ["ANY", "Call", "Ctx", "Expect", "Load", "Scenario", "expect"]

ANY = -1  # an `Expect` stage id that matches every stage id, None included


@dataclass(frozen=True)
class Expect:
    """Acceptable endings: (result, status, stage_id or ANY/None)."""

    allowed: frozenset[tuple[str, int, int | None]]

    def ok(self, o: Outcome) -> bool:
        return any(o.result == r and o.status == s and (st == ANY or o.stage_id == st) for r, s, st in self.allowed)


def expect(*allowed: tuple[str, int, int | None]) -> Expect:
    return Expect(frozenset(allowed))


@dataclass
class Ctx:
    """Where the load goes and how big it is; `t0` (monotonic) is when the load started."""

    host: str
    port: int
    scale: float
    t0: float = 0.0
    done: int = 0
    total: int = 0

    def n(self, full: int) -> int:
        """`full` requests scaled by `scale`, at least 4."""
        return max(4, round(full * self.scale))


Call = Callable[[], Awaitable[Outcome]]
Load = Callable[[Ctx], list[tuple[Call, Expect]]]


@dataclass(frozen=True)
class Scenario:
    """One fault scenario.

    Attributes:
        name: unique across every target (the CLI's SCENARIO argument).
        title: one line for the report and the plot.
        target: the server it runs against.
        args: the scenario's arguments to the target's command (its faults), given the context.
        expect_exit: the server's exit code the scenario expects (an `ExitCode`).
        load: the requests to send once the server is healthy; None sends none.
        sigint_after_fault: SIGINT the server this long after the fault fired.
        stop_after_load: check /health is 200 after the load, then send this signal.
        starts: False when the server must fail before it serves (a startup fault).
        baseline: a run without the fix (e.g. the vLLM-Omni plugin disabled), shown beside the
            fixed run; its failures are the "before" column and never fail the command.
        deadline: seconds after which this scenario's requests count as hung, when its requests
            wait longer by design (a stage that must first register again); None: the run's.
    """

    name: str
    title: str
    target: Target
    args: Callable[[Ctx], list[str]]
    expect_exit: int
    load: Load | None = None
    sigint_after_fault: float | None = None
    stop_after_load: int | None = None
    starts: bool = True
    baseline: bool = False
    deadline: float | None = None
