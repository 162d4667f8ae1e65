"""`omni-errors audit` on vllm-omni 0.30.0 (1,609 files, 573,763 lines), beside the named baseline
"single-threaded ast.parse of the tree" measured in the same run.

Run: make bench, or `pytest benches/test_bench_audit.py --benchmark-only` after `make audit-corpus`.
Targets (docs/audit.md): cold <= 3 s, cached <= 0.5 s on the 2-core development machine, where the baseline
takes about 4 s. The machine is shared: each result records the load average, and the minimum of the
rounds is the figure to read (contention only ever adds time).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ast_parse_baseline import parse_all, python_files
from omni_errors_audit import audit

TREE = Path(__file__).resolve().parents[1] / ".cache" / "vllm-omni-0.30.0" / "vllm_omni"
GROUP = "audit vllm-omni 0.30.0 (1,609 files)"
ROUNDS = 5


@pytest.fixture(scope="module")
def tree() -> Path:
    if not (TREE / "__init__.py").is_file():
        pytest.skip("run `make audit-corpus` first: it unpacks the vllm-omni 0.30.0 wheel into .cache/")
    return TREE


def _note(benchmark: Any, **extra: object) -> None:
    benchmark.group = GROUP
    benchmark.extra_info.update(loadavg=os.getloadavg()[0], cpus=len(os.sched_getaffinity(0)), **extra)


def _cli(*args: str) -> None:
    command = [sys.executable, "-m", "omni_errors_cli", "audit", *args, "--exit-zero", "--no-progress"]
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True, timeout=300)


def test_baseline_single_threaded_ast_parse(benchmark: Any, tree: Path) -> None:
    files = python_files(str(tree))
    _note(benchmark, files=benchmark.pedantic(parse_all, args=(files,), rounds=ROUNDS, iterations=1))


def test_audit_cold_in_process(benchmark: Any, tree: Path) -> None:
    report = benchmark.pedantic(lambda: audit([tree], use_cache=False, progress=False), rounds=ROUNDS, iterations=1)
    _note(benchmark, files=len(report.files), sites=len(report.sites), jobs=report.jobs)


def test_audit_cold_cli(benchmark: Any, tree: Path) -> None:
    """`omni-errors audit TREE --no-cache`, interpreter start-up included."""
    benchmark.pedantic(_cli, args=(str(tree), "--no-cache"), rounds=ROUNDS, iterations=1)
    _note(benchmark)


def test_audit_cached_cli(benchmark: Any, tree: Path, tmp_path: Path) -> None:
    """A rerun of `omni-errors audit TREE` on an unchanged tree, interpreter start-up included."""
    cache = tmp_path / "cache"
    _cli(str(tree), "--cache-dir", str(cache))
    benchmark.pedantic(_cli, args=(str(tree), "--cache-dir", str(cache)), rounds=ROUNDS * 2, iterations=1)
    _note(benchmark)
    shutil.rmtree(cache)


def test_audit_one_file_changed_cli(benchmark: Any, tree: Path, tmp_path: Path) -> None:
    """A rerun after one file changed: 1,608 results from the cache, one file scanned, classes re-resolved."""
    copy = tmp_path / "vllm_omni"
    shutil.copytree(tree, copy)
    cache = tmp_path / "cache"
    _cli(str(copy), "--cache-dir", str(cache))
    target = copy / "entrypoints" / "openai" / "api_server.py"
    original = target.read_text(encoding="utf-8")
    edits = iter(range(1_000))

    def edit_and_audit() -> None:
        target.write_text(original + f"\n# edit {next(edits)}\n", encoding="utf-8")
        _cli(str(copy), "--cache-dir", str(cache))

    benchmark.pedantic(edit_and_audit, rounds=ROUNDS, iterations=1)
    _note(benchmark)
