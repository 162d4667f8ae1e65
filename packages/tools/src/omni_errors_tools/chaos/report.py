"""What a scenario run found, and how it is shown: the result record, the table, the progress bar."""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Progress", "ScenarioResult", "table"]


@dataclass
class ScenarioResult:
    """Every check of one scenario; `passed` is their conjunction."""

    name: str
    title: str
    requests: int = 0
    outcomes: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    wrong: int = 0
    leaks: int = 0
    lost: int = 0
    hung: int = 0
    t_fault: float | None = None  # seconds after the load started
    t_answered: float | None = None  # seconds from the fault (or load start) to the last answer
    t_exit: float | None = None  # seconds from the fault (or load start) to the server's exit
    startup_s: float | None = None
    exit_code: int | None = None
    expected_exit: int = 0
    baseline: bool = False
    healthy: bool | None = None
    orphans: list[int] = field(default_factory=list)
    shm_left: list[str] = field(default_factory=list)
    timeline: list[float] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)
    log: str = ""

    @property
    def passed(self) -> bool:
        return (
            self.lost == 0
            and self.hung == 0
            and self.wrong == 0
            and self.leaks == 0
            and self.exit_code == self.expected_exit
            and not self.orphans
            and not self.shm_left
            and self.healthy is not False
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "title": self.title,
            "passed": self.passed,
            "baseline": self.baseline,
            "requests": self.requests,
            "outcomes": dict(self.outcomes),
            "statuses": dict(self.statuses),
            "lost": self.lost,
            "hung": self.hung,
            "wrong_status": self.wrong,
            "leaks": self.leaks,
            "t_fault_s": self.t_fault,
            "t_all_answered_s": self.t_answered,
            "t_exit_s": self.t_exit,
            "startup_s": self.startup_s,
            "exit_code": self.exit_code,
            "expected_exit": self.expected_exit,
            "healthy_after_load": self.healthy,
            "orphans": self.orphans,
            "shm_left": self.shm_left,
            "examples": self.examples,
            "log": self.log,
        }


_HEAD = (
    "scenario",
    "reqs",
    "ok",
    "err",
    "lost",
    "hung",
    "wrong",
    "leak",
    "answered",
    "exit@",
    "code",
    "orph",
    "shm",
    "",
)


def _row(r: ScenarioResult) -> tuple[str, ...]:
    return (
        r.name,
        str(r.requests),
        str(r.outcomes.get("ok", 0)),
        str(r.outcomes.get("error", 0)),
        str(r.lost),
        str(r.hung),
        str(r.wrong),
        str(r.leaks),
        "-" if r.t_answered is None or not r.requests else f"{r.t_answered:.2f}s",
        "-" if r.t_exit is None else f"{r.t_exit:.2f}s",
        f"{r.exit_code}/{r.expected_exit}",
        str(len(r.orphans)),
        str(len(r.shm_left)),
        ("PASS" if r.passed else "FAIL") + (" (baseline)" if r.baseline else ""),
    )


def table(results: list[ScenarioResult]) -> str:
    """One row per scenario, then the column notes, examples of what went wrong and failing logs."""
    rows = [_HEAD, *map(_row, results)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(_HEAD))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    notes = [
        "answered/exit@: seconds from the fault firing (or from the start of the load) to the last answer / to exit;",
        "code: exit code got/expected; orph: stage processes alive after exit; shm: segments left in /dev/shm.",
    ]
    for r in results:
        notes.extend(f"{r.name}: {ex}" for ex in r.examples)
        if not r.passed:
            notes.append(f"{r.name}: server log {r.log}")
    return "\n".join([*lines, "", *notes])


class Progress:
    """A one-line progress bar on stderr (only when enabled: a terminal, no --no-progress)."""

    def __init__(self, name: str, enabled: bool) -> None:
        self.name, self.enabled = name, enabled
        self.note = "starting server"

    def show(self, done: int, total: int, t: float) -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / total) if total else 0
        bar = "#" * filled + "." * (width - filled)
        sys.stderr.write(f"\r  {self.name:<14} [{bar}] {done:>5}/{total:<5} {t:6.1f}s  {self.note:<28}")
        sys.stderr.flush()

    def end(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
