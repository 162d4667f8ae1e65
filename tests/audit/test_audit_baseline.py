"""Baselines: CI fails only on new sites; fingerprints survive line moves and reformatting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from audit_helpers import WriteTree
from omni_errors_audit import AuditInputError, audit, baseline
from omni_errors_audit.cli import exit_code

ORIGINAL = """\
def f(x):
    if x is None:
        raise ValueError("x is required")
    if x < 0:
        raise ValueError("x is required")
    return x
"""


def test_known_sites_pass_and_new_sites_fail(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree({"m.py": ORIGINAL})
    allow = tmp_path / "baseline.json"
    assert baseline.write(allow, audit([package], use_cache=False, jobs=1, progress=False)) == 2
    report = audit([package], use_cache=False, jobs=1, progress=False)
    baseline.apply(report, baseline.read(allow))
    assert report.baseline == {"new": 0, "known": 2, "fixed": 0}
    assert exit_code(report, exit_zero=False) == 0

    # A third copy of the same statement in the same function is new: counts are part of the baseline.
    write_tree({"m.py": ORIGINAL.replace("    return x\n", '    raise ValueError("x is required")\n')})
    report = audit([package], use_cache=False, jobs=1, progress=False)
    baseline.apply(report, baseline.read(allow))
    assert report.baseline == {"new": 1, "known": 2, "fixed": 0}
    assert exit_code(report, exit_zero=False) == 1
    assert exit_code(report, exit_zero=True) == 0


def test_fingerprints_survive_line_moves_reformatting_and_comments(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree({"m.py": ORIGINAL})
    allow = tmp_path / "baseline.json"
    baseline.write(allow, audit([package], use_cache=False, jobs=1, progress=False))
    moved = (
        "import os  # new import above: every line moves down\n\n\n"
        "def helper():\n    return os.getcwd()\n\n\n"
        + ORIGINAL.replace(
            'raise ValueError("x is required")', 'raise ValueError(\n            "x is required"  # why\n        )'
        )
    )
    write_tree({"m.py": moved})
    report = audit([package], use_cache=False, jobs=1, progress=False)
    baseline.apply(report, baseline.read(allow))
    assert report.baseline == {"new": 0, "known": 2, "fixed": 0}


def test_fixed_sites_are_counted_and_a_rewrite_tightens_the_baseline(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree({"m.py": ORIGINAL})
    allow = tmp_path / "baseline.json"
    baseline.write(allow, audit([package], use_cache=False, jobs=1, progress=False))
    write_tree({"m.py": ORIGINAL.replace('    if x < 0:\n        raise ValueError("x is required")\n', "")})
    report = audit([package], use_cache=False, jobs=1, progress=False)
    baseline.apply(report, baseline.read(allow))
    assert report.baseline == {"new": 0, "known": 1, "fixed": 1}
    assert baseline.write(allow, report) == 1


def test_a_moved_site_into_another_function_is_new(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree({"m.py": ORIGINAL})
    allow = tmp_path / "baseline.json"
    baseline.write(allow, audit([package], use_cache=False, jobs=1, progress=False))
    write_tree({"m.py": ORIGINAL.replace("def f(x):", "def g(x):")})
    report = audit([package], use_cache=False, jobs=1, progress=False)
    baseline.apply(report, baseline.read(allow))
    assert report.baseline == {"new": 2, "known": 0, "fixed": 2}


def test_baseline_file_is_reviewable_json(write_tree: WriteTree, tmp_path: Path) -> None:
    package = write_tree({"m.py": ORIGINAL, "n.py": "import os\nos._exit(3)\n"})
    allow = tmp_path / "baseline.json"
    baseline.write(allow, audit([package], use_cache=False, jobs=1, progress=False))
    text = allow.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert doc["format"] == "omni-errors-audit-baseline" and doc["version"] == 2 and doc["sites"] == 3
    assert list(doc["files"]) == ["pkg/m.py", "pkg/n.py"]
    (entry,) = doc["files"]["pkg/m.py"]
    assert entry[0] == "OE101" and entry[2] == 2 and entry[3] == "f" and entry[4] == 'raise ValueError("x is required")'
    assert '    ["OE301", ' in text  # one site per line: a fixed site is one removed line in review


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "baseline file does not exist"),
        ("{not json", "cannot read baseline"),
        ('{"format": "other"}', "is not an omni-errors audit baseline"),
        (
            '{"format": "omni-errors-audit-baseline", "version": 2, "files": {"a.py": [["OE101"]]}}',
            "malformed baseline",
        ),
    ],
)
def test_bad_baseline_files_are_clear_errors(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "baseline.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(AuditInputError, match=message):
        baseline.read(path)
