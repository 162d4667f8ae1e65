"""`omni-errors audit` run as users run it: help, errors, exit codes, outputs, baseline flow, progress."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from audit_helpers import WriteTree
from omni_errors_audit.rules import markdown_table

ROOT = Path(__file__).resolve().parents[2]
MANY = {f"m{i}.py": f"def f(x):\n    if x:\n        raise ValueError('bad {i}')\n" for i in range(30)}


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "omni_errors_cli", "audit", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def test_help_has_examples_and_exit_codes() -> None:
    out = _cli("--help")
    assert out.returncode == 0
    for text in ("examples:", "--baseline", "--write-baseline", "--sarif", "--json", "--package", "exit codes:"):
        assert text in out.stdout
    for code in ("  0  ", "  1  ", "  2  "):
        assert code in out.stdout.split("exit codes:")[1]
    assert (
        "audit"
        in subprocess.run(
            [sys.executable, "-m", "omni_errors_cli", "--help"], capture_output=True, text=True, timeout=120, check=True
        ).stdout
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["/no/such/folder"], "omni-errors audit: error: path does not exist: /no/such/folder"),
        (
            ["--package", "no_such_package_xyz"],
            "omni-errors audit: error: no installed package named 'no_such_package_xyz'",
        ),
        ([], "give at least one PATH or --package NAME"),
        (["--write-baseline", "."], "--write-baseline needs --baseline FILE"),
        (["--jobs", "0", "."], "--jobs must be at least 1"),
    ],
)
def test_bad_input_is_a_clear_usage_error(args: list[str], message: str) -> None:
    out = _cli(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_an_installed_package_is_audited_in_full(tmp_path: Path) -> None:
    out = _cli("--package", "omni_errors_audit", "--json", "--exit-zero", "--cache-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    package = ROOT / "packages" / "audit" / "src" / "omni_errors_audit"
    installed = {str(p) for p in package.rglob("*.py") if "__pycache__" not in p.parts}
    assert doc["files"]["total"] == len(installed)
    assert doc["files"]["unparsable"] == 0
    assert "(top)" in doc["by_area"]  # its modules sit at the top of the package


def test_ci_baseline_flow(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree(MANY)
    allow = tmp_path / "allow.json"
    cache = ["--cache-dir", str(tmp_path / "cache")]
    assert _cli(str(package), *cache).returncode == 1  # no baseline: every site is new

    wrote = _cli(str(package), "--baseline", str(allow), "--write-baseline", *cache)
    assert wrote.returncode == 0 and "wrote 30 sites" in wrote.stderr

    known = _cli(str(package), "--baseline", str(allow), *cache)
    assert known.returncode == 0, known.stdout
    assert "baseline: 0 new, 30 known, 0 fixed" in known.stdout

    write_tree({"m3.py": "import os\n\n\ndef f(x):\n    if x:\n        raise ValueError('bad 3')\n    os._exit(1)\n"})
    new = _cli(str(package), "--baseline", str(allow), *cache)
    assert new.returncode == 1
    assert "baseline: 1 new, 30 known, 0 fixed" in new.stdout
    assert new.stdout.rstrip().endswith(
        "m3.py:7:5: OE301 `os._exit` skips cleanup, `finally` blocks and atexit handlers"
    )


def test_sarif_and_json_to_a_file(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree(MANY)
    report = tmp_path / "audit.sarif"
    out = _cli(str(package), "--sarif", "-o", str(report), "--no-cache")
    assert out.returncode == 1 and out.stdout == ""
    assert json.loads(report.read_text(encoding="utf-8"))["runs"][0]["invocations"][0]["exitCode"] == 1
    assert _cli(str(package), "--sarif", "--json").returncode == 2  # one format at a time


def test_rules_reference_matches_the_docs() -> None:
    out = _cli("--rules", "markdown")
    assert out.returncode == 0
    assert out.stdout == markdown_table()
    assert markdown_table() in (ROOT / "docs" / "audit.md").read_text(encoding="utf-8")


def _run_on_a_tty(args: list[str], timeout: float = 120.0) -> tuple[int, str]:
    """Run the CLI with stderr on a pseudo-terminal (stdout piped); return (exit code, what the tty got)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "omni_errors_cli", "audit", *args], stdout=subprocess.PIPE, stderr=follower
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 4096)
                except OSError:  # the child closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        assert proc.stdout is not None
        proc.stdout.read()
        return proc.wait(timeout=max(1.0, deadline - time.monotonic())), b"".join(chunks).decode()
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_progress_bar_only_on_a_terminal(write_tree: WriteTree) -> None:
    package = write_tree(MANY)
    code, tty = _run_on_a_tty([str(package), "--no-cache"])
    assert code == 1
    assert "auditing 31/31 files [##############################]" in tty
    assert "\x1b[K" in tty  # the bar is cleared before the report
    piped = _cli(str(package), "--no-cache")
    assert "auditing" not in piped.stderr
    code, tty = _run_on_a_tty([str(package), "--no-cache", "--no-progress"])
    assert "auditing" not in tty


def test_a_gate_pointed_at_a_folder_without_python_files_fails(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "README.md").write_text("not code\n", encoding="utf-8")
    out = _cli(str(tmp_path / "docs"), "--no-cache")
    assert out.returncode == 2
    assert "omni-errors audit: error: no .py file under" in out.stderr


def test_a_failing_run_lists_its_new_sites_and_a_mass_fix_is_flagged(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree(MANY)
    failing = _cli(str(package), "--no-cache")
    assert failing.returncode == 1
    assert "new sites of gated rules: 30" in failing.stdout
    assert "m0.py:3:9: OE101 raw `raise ValueError`" in failing.stdout

    allow = tmp_path / "allow.json"
    assert _cli(str(package), "--baseline", str(allow), "--write-baseline", "--no-cache").returncode == 0
    for i in range(1, 30):  # 29 of the 30 sites "fixed" at once: more likely the wrong tree
        (package / f"m{i}.py").write_text("def f(x):\n    return x\n", encoding="utf-8")
    out = _cli(str(package), "--baseline", str(allow), "--no-cache")
    assert out.returncode == 0
    assert "warning: 29 of the baseline's 30 sites are fixed at once" in out.stderr
    assert "warning: 29 of the baseline's 30 sites are fixed at once" in out.stdout


def test_github_annotations(write_tree: WriteTree) -> None:
    package = write_tree({"m.py": "def f(x):\n    if x:\n        raise ValueError('100%, bad')\n"})
    out = _cli(str(package), "--github", "--no-cache", cwd=package.parent)
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        "::error file=pkg/m.py,line=3,endLine=3,col=9,title=OE101 raw-value-error::raw raise ValueError",
        "omni-errors audit: 2 files, 1 new sites of gated rules",
    ]


def test_the_pre_commit_hook_runs_the_gate_with_a_baseline(write_tree: WriteTree, tmp_path: Path) -> None:
    import shlex

    import tomllib
    import yaml

    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text(encoding="utf-8"))
    assert hook["id"] == "omni-errors-audit" and hook["pass_filenames"] is False and hook["language"] == "python"
    program, *options = shlex.split(hook["entry"])
    assert program == "omni-errors-audit" and hook["additional_dependencies"] == ["./packages/audit"]
    project = tomllib.loads((ROOT / "packages" / "audit" / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["scripts"][program] == "omni_errors_audit.__main__:main" and project["dependencies"] == []
    package = write_tree(MANY)
    allow = tmp_path / "allow.json"
    assert _cli(str(package), "--baseline", str(allow), "--write-baseline", "--no-cache").returncode == 0
    args = [*options, str(package), "--baseline", str(allow), "--cache-dir", str(tmp_path / "cache")]
    assert _cli(*args).returncode == 0
    write_tree({"new.py": "def g():\n    raise TypeError('new')\n"})
    assert _cli(*args).returncode == 1


def test_rules_for_a_terminal_fit_100_columns() -> None:
    out = _cli("--rules")
    assert out.returncode == 0
    assert "OE303  wait-without-deadline  (advisory: reported, never gated)" in out.stdout
    assert "`" not in out.stdout and "|" not in out.stdout
    assert max(map(len, out.stdout.splitlines())) <= 100
