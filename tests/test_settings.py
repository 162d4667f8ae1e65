"""`omni_errors.settings`: every environment number in one table; a bad value is named in the log and
ignored; the docs hold the generated table."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from omni_errors.settings import SETTINGS, Setting, markdown_table

DOC = Path(__file__).resolve().parents[1] / "docs" / "vllm-omni.md"
SECONDS = Setting("OMNI_ERRORS_TEST_SECONDS", 3.0, lambda v: v > 0, "a positive number of seconds", "a test's")


@pytest.mark.parametrize(("raw", "expected"), [(None, 3.0), ("2.5", 2.5), ("0", 3.0), ("nan", 3.0), ("soon", 3.0)])
def test_a_value_is_used_only_when_it_is_a_finite_valid_number(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str | None, expected: float
) -> None:
    if raw is not None:
        monkeypatch.setenv(SECONDS.name, raw)
    with caplog.at_level(logging.ERROR, logger="omni_errors"):
        assert SECONDS.read() == expected
    refused = raw is not None and expected == 3.0
    assert [r.getMessage() for r in caplog.records] == (
        [f"omni-errors: {SECONDS.name}={raw!r} is not a positive number of seconds; using 3"] if refused else []
    )


def test_every_setting_is_named_once_and_its_default_is_valid() -> None:
    names = [s.name for s in SETTINGS]
    assert len(names) == len(set(names)) and all(n.startswith("OMNI_ERRORS_") for n in names)
    assert all(s.valid(s.default) for s in SETTINGS)


def test_the_docs_hold_the_generated_table() -> None:
    table = markdown_table()
    assert all(f"| `{s.name}` |" in table for s in SETTINGS)
    assert table in DOC.read_text(encoding="utf-8"), (
        "docs/vllm-omni.md's settings table is stale: replace it (markers included) with "
        "`omni_errors.settings.markdown_table()`"
    )
