"""docs/errors.md is generated from the classify table; this fails when either drifts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from omni_errors.semantics.catalog import render_catalog
from omni_errors.semantics.classification import RULES
from omni_errors.semantics.rules import LazyClass
from omni_errors.semantics.vllm_rows import ROWS

DOC = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def test_catalog_matches_committed_doc() -> None:
    expected = render_catalog()
    assert DOC.read_text(encoding="utf-8") == expected, (
        "docs/errors.md is stale: regenerate it with `omni-errors catalog > docs/errors.md`"
    )


def test_catalog_has_one_row_per_rule() -> None:
    rows = [line for line in render_catalog().splitlines() if line.startswith("| `")]
    assert len(rows) == len(RULES)


def test_each_named_class_is_the_class_the_catalogue_names() -> None:
    for named, rule in ROWS:
        if isinstance(named, LazyClass):
            continue
        cls = named.load()
        assert f"{cls.__module__}.{cls.__qualname__}" == named.qualname
        assert RULES[cls] is rule


def test_the_catalogue_renders_without_vllm_or_torch_and_without_warnings() -> None:
    probe = (
        "import sys; from omni_errors.semantics.catalog import render_catalog; render_catalog(); "
        "heavy = ('vllm', 'torch', 'fastapi', 'omni_errors.semantics.classification'); "
        "print(sorted(m for m in heavy if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-W", "error", "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert (out.stdout, out.stderr) == ("[]\n", "")
