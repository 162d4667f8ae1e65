"""`.ci/phases.py`, the timer behind `make test`'s closing table: each phase run and logged, its
exit status passed on, the table with the total against the budget, and a loud line past 45 minutes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PHASES = ROOT / ".ci" / "phases.py"


def _phases(log: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OMNI_PHASES"}
    if log is not None:
        env["OMNI_PHASES"] = str(log)
    return subprocess.run([sys.executable, str(PHASES), *args], capture_output=True, text=True, env=env, timeout=60)


def test_each_phase_is_logged_with_its_exit_status_and_the_report_names_the_slowest(tmp_path: Path) -> None:
    log = tmp_path / "phases.jsonl"
    assert _phases(log, "start").returncode == 0
    assert _phases(log, "run", "quick", "--", sys.executable, "-c", "pass").returncode == 0
    failed = _phases(
        log, "run", "failing", "--", sys.executable, "-c", "import time; time.sleep(0.3); raise SystemExit(3)"
    )
    assert failed.returncode == 3
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(r["name"], r["rc"]) for r in rows] == [("quick", 0), ("failing", 3)]
    assert all(r["end"] >= r["start"] and r["load_max"] >= 0 for r in rows)
    assert all(r["cpu"] >= 0 for r in rows)

    report = _phases(log, "report")
    assert report.returncode == 0
    lines = report.stdout.splitlines()
    assert any(line.startswith("quick ") and line.endswith("ok") for line in lines)
    assert any(line.startswith("failing ") and line.endswith("exit 3") for line in lines)
    assert "slowest phase: failing" in report.stdout and "of 2100 s" in report.stdout
    assert "OVER" not in report.stdout
    assert "cpu: " in report.stdout and " cores, so at least " in report.stdout


def test_a_phase_counts_the_cpu_time_of_what_it_waited_for(tmp_path: Path) -> None:
    """A suite's CPU time includes the servers it starts: a child's busy loop counts."""
    log = tmp_path / "phases.jsonl"
    busy = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'sum(range(30_000_000))'], check=True)"
    assert _phases(log, "run", "busy", "--", sys.executable, "-c", busy).returncode == 0
    (row,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert row["cpu"] > 0.2, row


def test_outside_make_test_a_phase_only_runs_its_command(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = _phases(None, "run", "x", "--", sys.executable, "-c", f"open({str(marker)!r}, 'w').close()")
    assert result.returncode == 0 and marker.exists()
    assert _phases(None, "report").returncode == 2


def test_a_run_past_45_minutes_says_so_loudly(tmp_path: Path) -> None:
    log = tmp_path / "phases.jsonl"
    row = {"name": "pytest", "start": 0.0, "end": 46 * 60.0, "rc": 0, "load_mean": 2.0, "load_max": 3.0}
    log.write_text(json.dumps(row) + "\n")
    report = _phases(log, "report").stdout
    assert "OVER 45 MINUTES: 46.0 min" in report and "slowest phase: pytest (2760 s)" in report


def test_usage_errors_print_the_help() -> None:
    result = _phases(None, "run", "name-without-command")
    assert result.returncode == 2 and "phases.py run NAME -- CMD" in result.stderr
