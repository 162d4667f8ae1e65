"""The exit-code tables are generated from `ExitCode`, `MEANINGS` and `PRECEDENCE`; the docs hold them."""

from __future__ import annotations

from pathlib import Path

from omni_errors.fatal.exitcodes import MEANINGS, ExitCode
from omni_errors.fatal.policy import PRECEDENCE
from omni_errors.fatal.tables import generated, in_order, markdown_table, precedence_text

DOC = Path(__file__).resolve().parents[2] / "docs" / "lifecycle.md"


def test_every_code_has_one_meaning() -> None:
    assert set(MEANINGS) == set(ExitCode)


def test_the_fatal_codes_come_first_in_the_order_that_decides() -> None:
    assert in_order()[: len(PRECEDENCE)] == list(PRECEDENCE)
    assert in_order([ExitCode.STAGE_LOST, ExitCode.LINK_LOST, ExitCode.OK]) == [
        ExitCode.LINK_LOST,
        ExitCode.STAGE_LOST,
        ExitCode.OK,
    ]
    assert precedence_text([ExitCode.STAGE_LOST, ExitCode.OOM]) == "81 (`OOM`) > 85 (`STAGE_LOST`)"


def test_the_lifecycle_docs_hold_the_generated_table() -> None:
    table = markdown_table()
    assert all(f"| {int(code)} | `{code.name}` | {MEANINGS[code]} |" in table for code in ExitCode)
    assert generated("exit codes", table) in DOC.read_text(encoding="utf-8"), (
        "docs/lifecycle.md's exit-code table is stale: replace it (markers included) with "
        "`omni-errors catalog --exit-codes`"
    )
