"""`make test`'s vLLM-Omni jobs split this directory between them: each test module runs in one job,
and the upstream job runs again only the modules it names, on the series' tree. A module collected
by two jobs starts its servers twice (pytest's `--ignore-glob` does not apply to files named on its
command line, which let the LLM-stage modules run in the fatal job as well as their own)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
JOBS = ("pytest-omni", "pytest-omni-fatal", "pytest-omni-llm", "pytest-multinode")
RERUN_BY = "pytest-upstream"


def _pytest_args(job: str) -> list[str]:
    """The arguments `make JOB` gives pytest, globs expanded as its shell expands them."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMNI_PHASES", "MAKEFLAGS")}
    dry = subprocess.run(
        ["make", "-s", "-n", job], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60, check=True
    )
    command = dry.stdout.replace("\\\n", " ").strip()
    words = subprocess.run(
        ["bash", "-c", f"printf '%s\\0' {command.partition(' -m pytest ')[2]}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.split("\0")[:-1]
    assert words, f"no pytest arguments in `make -n {job}`: {command}"
    return words


def _modules(job: str) -> set[str]:
    """The test modules of this directory that `make JOB` collects."""
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *_pytest_args(job)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert collected.returncode == 0, collected.stdout[-2000:] + collected.stderr[-2000:]
    return {line.split("::")[0] for line in collected.stdout.splitlines() if line.startswith("tests/vllm_omni/")}


def test_each_module_runs_in_one_job_and_the_upstream_job_reruns_only_what_it_names() -> None:
    by_job = {job: _modules(job) for job in JOBS}
    counts = Counter(module for modules in by_job.values() for module in modules)
    assert {m: n for m, n in counts.items() if n > 1} == {}, by_job
    everything = {str(p.relative_to(ROOT)) for p in (ROOT / "tests" / "vllm_omni").glob("test_*.py")}
    series = {m for m in everything if Path(m).name.startswith("test_upstream_")}
    assert everything - series == set(counts), "modules no job runs: " + ", ".join(
        sorted(everything - series - set(counts))
    )
    rerun = _modules(RERUN_BY)
    assert series <= rerun and rerun - series <= set(counts), sorted(rerun)
