"""docs/errors.md is generated from the classify table; this fails when either drifts."""

from __future__ import annotations

from pathlib import Path

from omni_errors.semantics.catalog import render_catalog
from omni_errors.semantics.classification import RULES

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def test_catalog_matches_committed_doc() -> None:
    expected = render_catalog()
    assert DOC.read_text(encoding="utf-8") == expected, (
        "docs/errors.md is stale: regenerate it with `omni-errors catalog > docs/errors.md`"
    )


def test_catalog_has_one_row_per_rule() -> None:
    rows = [line for line in render_catalog().splitlines() if line.startswith("| `")]
    assert len(rows) == len(RULES)
