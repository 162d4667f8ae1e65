"""Fingerprints survive formatting: the whole vllm-omni 0.30.0 tree, reformatted by ruff, is known to
the committed baseline of the original, site for site.

Three rewrites that move nearly every line of the tree: `ruff format` at line length 60 (wraps), at 160
(joins some), and at 320 with the magic trailing comma ignored (joins every wrapped statement that fits
on one line). Each must report 0 new and 0 fixed sites against docs/audit/vllm-omni-0.30.baseline.json,
which tests/audit/test_audit_vllm_omni.py checks to be the baseline of the unchanged tree.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from omni_errors_audit import audit, baseline

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "docs" / "audit" / "vllm-omni-0.30.baseline.json"
RUFF = Path(sys.executable).with_name("ruff")

REFORMATS = {
    "wrapped-at-60": ["--line-length", "60"],
    "at-160": ["--line-length", "160"],
    "joined-at-320": ["--line-length", "320", "--config", "format.skip-magic-trailing-comma = true"],
}


@pytest.mark.parametrize("style", list(REFORMATS))
def test_a_reformatted_tree_has_no_new_site(vllm_omni_package: Path, tmp_path: Path, style: str) -> None:
    copy = tmp_path / "vllm_omni"  # the package's own name: fingerprints hold the path inside it
    shutil.copytree(vllm_omni_package, copy)
    command = [str(RUFF), "format", "--isolated", "--quiet", *REFORMATS[style], str(copy)]
    subprocess.run(command, check=True, timeout=300)
    changed = sum(
        a.read_bytes() != b.read_bytes()
        for a, b in ((p, copy / p.relative_to(vllm_omni_package)) for p in vllm_omni_package.rglob("*.py"))
    )
    assert changed > 500, "the reformat must rewrite hundreds of files, or the test proves nothing"

    report = audit([copy], use_cache=False, progress=False)
    baseline.apply(report, baseline.read(BASELINE))
    new = [f"{s.rule} {s.key_path}:{s.line} {s.excerpt}" for s in report.sites if baseline.gated(s) and s.new]
    assert new == []
    assert report.baseline["fixed"] == 0
    assert report.baseline["known"] > 7000
