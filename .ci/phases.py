#!/usr/bin/env python3
"""Time each phase of `make test` and print one table at its end.

    phases.py start                  begin a run: empty the log named by $OMNI_PHASES
    phases.py run NAME -- CMD ...    run CMD; with $OMNI_PHASES set, log its wall time, CPU time and load
    phases.py report                 the table: each phase, its wall and CPU time, the load beside it, the total

A phase's CPU time is that of CMD and every process it waited for (`RUSAGE_CHILDREN`): the servers
a suite starts included. On a shared machine it is the figure that adds up: the phases' CPU time
over the cores is the least wall time the run can take, however its phases are arranged.

Outside a `make test` ($OMNI_PHASES unset) `run` only runs its command. The standard library only:
this runs before any environment exists.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

# CI's own limit is 90 minutes; the run aims at 35 and says so loudly past 45.
BUDGET_S = 35 * 60
LOUD_S = 45 * 60
LOAD_SAMPLE_S = 5.0


def _log() -> Path | None:
    name = os.environ.get("OMNI_PHASES")
    return Path(name) if name else None


def _load() -> float:
    with open("/proc/loadavg", encoding="ascii") as f:
        return float(f.read().split()[0])


def start() -> int:
    log = _log()
    if log is None:
        print("phases.py start: set OMNI_PHASES to the log file", file=sys.stderr)
        return 2
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("", encoding="utf-8")
    return 0


def run(name: str, command: list[str]) -> int:
    log = _log()
    if log is None:
        return subprocess.call(command)
    samples = [_load()]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(LOAD_SAMPLE_S):
            samples.append(_load())

    sampler = threading.Thread(target=sample, daemon=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.time()
    sampler.start()
    try:
        rc = subprocess.call(command)
    finally:
        done.set()
        sampler.join(timeout=LOAD_SAMPLE_S)
    ended = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = {
        "name": name,
        "start": began,
        "end": ended,
        "rc": rc,
        "cpu": cpu,
        "load_mean": sum(samples) / len(samples),
        "load_max": max(samples),
    }
    # One short line per phase, appended in one write: the suites run side by side.
    with log.open("a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    return rc


def report() -> int:
    log = _log()
    if log is None or not log.exists():
        print("phases.py report: no phase log (OMNI_PHASES)", file=sys.stderr)
        return 2
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
    if not rows:
        print("phases: no phase ran")
        return 0
    first = min(r["start"] for r in rows)
    total = max(r["end"] for r in rows) - first
    print()
    print(f"{'phase':<22} {'start':>7} {'wall':>8} {'cpu':>8}  {'load mean/max':>13}  result")
    for r in sorted(rows, key=lambda r: r["start"]):
        wall = r["end"] - r["start"]
        result = "ok" if r["rc"] == 0 else f"exit {r['rc']}"
        load = f"{r['load_mean']:.1f}/{r['load_max']:.1f}"
        print(
            f"{r['name']:<22} {r['start'] - first:>6.0f}s {wall:>7.0f}s {r.get('cpu', 0):>7.0f}s  {load:>13}  {result}"
        )
    slowest = max(rows, key=lambda r: r["end"] - r["start"])
    cpu = sum(r.get("cpu", 0) for r in rows)
    cores = os.cpu_count() or 1
    print(f"{'total':<22} {'':>7} {total:>7.0f}s {cpu:>7.0f}s  (phases side by side: the wall total is not the sum)")
    print(f"cpu: {cpu:.0f} s on {cores} cores, so at least {cpu / cores:.0f} s of wall however the phases are arranged")
    print(
        f"budget: {total:.0f} s of {BUDGET_S} s ({total / BUDGET_S:.0%}); slowest phase: "
        f"{slowest['name']} ({slowest['end'] - slowest['start']:.0f} s)"
    )
    if BUDGET_S < total <= LOUD_S:
        print(f"over budget by {total - BUDGET_S:.0f} s")
    if total > LOUD_S:
        bar = "!" * 78
        print(f"{bar}\n!!! OVER {LOUD_S // 60} MINUTES: {total / 60:.1f} min. CI's limit is 90; find the time.\n{bar}")
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["start"] and len(argv) == 1:
        return start()
    if argv[:1] == ["report"] and len(argv) == 1:
        return report()
    if argv[:1] == ["run"] and len(argv) >= 4 and argv[2] == "--":
        return run(argv[1], argv[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
