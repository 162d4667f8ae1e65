"""The `omni-errors` command line, run as users run it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omni_errors.cli", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_help_lists_the_commands() -> None:
    out = _cli("--help")
    assert out.returncode == 0
    for command in ("bench", "catalog", "serve", "chaos"):
        assert command in out.stdout


def test_catalog_prints_the_committed_catalogue() -> None:
    out = _cli("catalog")
    assert out.returncode == 0, out.stderr
    assert out.stdout == (ROOT / "docs" / "errors.md").read_text(encoding="utf-8")


def test_unknown_command_fails_with_usage() -> None:
    out = _cli("frobnicate")
    assert out.returncode == 2
    assert "invalid choice" in out.stderr


def test_chaos_rejects_an_unknown_scenario_or_target() -> None:
    out = _cli("chaos", "no-such-scenario")
    assert out.returncode == 2
    assert "unknown scenario(s) no-such-scenario for target pipeline; choose from pr-fatal" in out.stderr
    out = _cli("chaos", "--target", "no-such-target")
    assert out.returncode == 2
    assert "invalid choice" in out.stderr
