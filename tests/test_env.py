"""Numbers an operator sets through the environment: a bad value is named in the log and ignored."""

from __future__ import annotations

import logging

import pytest
from omni_errors.env import number_from_env

_NAME = "OMNI_ERRORS_TEST_SECONDS"


@pytest.mark.parametrize(("raw", "expected"), [(None, 3.0), ("2.5", 2.5), ("0", 3.0), ("nan", 3.0), ("soon", 3.0)])
def test_a_value_is_used_only_when_it_is_a_finite_valid_number(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, raw: str | None, expected: float
) -> None:
    if raw is not None:
        monkeypatch.setenv(_NAME, raw)
    with caplog.at_level(logging.ERROR, logger="omni_errors"):
        assert number_from_env(_NAME, 3.0, lambda v: v > 0, "a positive number of seconds") == expected
    refused = raw is not None and expected == 3.0
    assert [r.getMessage() for r in caplog.records] == (
        [f"omni-errors: {_NAME}={raw!r} is not a positive number of seconds; using 3"] if refused else []
    )
