"""Fault specifications and a stage's fault driver (no server, no vLLM, no torch)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omni_errors_tools.pipeline.faults import FaultSpec, StageFaults, first_fault_time, parse_header


def test_parse_header() -> None:
    assert parse_header("oom; stage=2; after=5") == FaultSpec("oom", 2, 5)
    assert parse_header("hang") == FaultSpec("hang", 0, 0)


@pytest.mark.parametrize("bad", ["nope", "oom;stage=7", "oom;after=-1", "oom;when=3", "oom;stage"])
def test_parse_header_rejects(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_header(bad)


def test_stage_faults_process_level(tmp_path: Path) -> None:
    marker = tmp_path / "fault"
    faults = StageFaults(1, fault="stage_error", fault_after=2, marker=str(marker))
    assert faults.step(2, ["a"]) == []
    failed = faults.step(3, ["a", "b"])
    assert [f.request_id for f in failed] == ["a", "b"]
    assert all(isinstance(f.error, RuntimeError) for f in failed)
    assert faults.step(4, ["c"])[0].request_id == "c"  # non-fatal: every later request fails too
    fatal = StageFaults(0, fault="fatal", fault_after=0, marker=str(marker))
    with pytest.raises(RuntimeError, match="injected fatal"):
        fatal.step(1, ["a"])
    assert fatal.step(2, ["a"]) == []  # a fatal fault fires once
    lines = marker.read_text().splitlines()
    assert [line.split()[1:] for line in lines] == [["1", "stage_error"]] * 3 + [["0", "fatal"]]
    assert first_fault_time(marker) == float(lines[0].split()[0])
    assert first_fault_time(tmp_path / "never") is None


def test_stage_faults_per_request_and_startup() -> None:
    faults = StageFaults(2)
    spec = FaultSpec("value_error", stage=2, after=1).as_payload()
    assert faults.request("r", spec, 1) is None
    failed = faults.request("r", spec, 2)
    assert failed is not None and failed.request_id == "r" and isinstance(failed.error, ValueError)
    assert faults.request("r", {**spec, "stage": 0}, 5) is None  # another stage's fault
    with pytest.raises(RuntimeError, match="injected fatal"):
        faults.request("r", {"kind": "fatal", "stage": 2, "after": 0}, 1)
    with pytest.raises(RuntimeError, match="model weights not found"):
        StageFaults(1, fault="startup")
