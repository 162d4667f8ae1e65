"""Fault specifications (no server, no vLLM)."""

from __future__ import annotations

import pytest
from omni_errors.pipeline.faults import FaultSpec, parse_header


def test_parse_header() -> None:
    assert parse_header("oom; stage=2; after=5") == FaultSpec("oom", 2, 5)
    assert parse_header("hang") == FaultSpec("hang", 0, 0)


@pytest.mark.parametrize("bad", ["nope", "oom;stage=7", "oom;after=-1", "oom;when=3", "oom;stage"])
def test_parse_header_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_header(bad)
