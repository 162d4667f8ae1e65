"""docs/vllm-omni.md's patch table is generated from the manifest; this fails when either drifts."""

from __future__ import annotations

from pathlib import Path

from omni_errors.fatal.tables import generated, markdown_table
from omni_errors_vllm_omni.doctor import EXIT_CODES
from omni_errors_vllm_omni.manifest import TARGETS, render_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "vllm-omni.md"


def test_the_patch_table_in_the_docs_is_the_generated_one() -> None:
    assert render_table() in DOC.read_text(encoding="utf-8"), (
        "docs/vllm-omni.md's patch table is stale: replace it (markers included) with `omni-errors doctor --table`"
    )


def test_the_table_has_one_row_per_target() -> None:
    rows = [line for line in render_table().splitlines() if line.startswith("| ") and "`" in line.split("|")[2]]
    assert len(rows) == len(TARGETS)


def test_the_exit_code_table_in_the_docs_is_the_generated_one() -> None:
    assert generated("exit codes with the plugin", markdown_table(EXIT_CODES)) in DOC.read_text(encoding="utf-8"), (
        "docs/vllm-omni.md's exit-code table is stale: replace it (markers included) with "
        "`omni-errors doctor --exit-codes`"
    )
