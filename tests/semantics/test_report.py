"""The one report path: classify, count, log once per cause, call the fatal hook, render."""

from __future__ import annotations

import logging

import pytest
from omni_errors import OmniErrorDetails
from omni_errors.semantics.core_table import fatal_record
from omni_errors.semantics.exceptions import OmniEngineDeadError
from omni_errors.semantics.reporting import report
from prometheus_client import REGISTRY
from vllm.exceptions import VLLMValidationError


def _count(**labels: str) -> float:
    return REGISTRY.get_sample_value("omni_errors_total", labels) or 0.0


def _boom() -> RuntimeError:
    try:
        raise RuntimeError("worker crashed")
    except RuntimeError as exc:
        return exc


def test_a_local_server_error_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "omni_errors.semantics.reporting")
    labels = {
        "category": "server",
        "error_type": "InternalServerError",
        "status": "500",
        "stage_id": "",
        "fatal": "false",
    }
    before = _count(**labels)
    rendered = report(_boom(), lambda d: ("rendered", d.status_code), where="GET /x", request_id="r1")
    assert rendered == ("rendered", 500)
    assert _count(**labels) == before + 1
    [record] = caplog.records
    assert (record.levelno, record.getMessage()) == (logging.ERROR, "GET /x -> 500 InternalServerError")
    assert record.exc_info is not None and "worker crashed" in caplog.text


def test_a_client_error_is_one_info_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "omni_errors.semantics.reporting")
    details = report(VLLMValidationError("bad", parameter="n"), lambda d: d, where="POST /v1/chat/completions")
    assert (details.status_code, details.parameter) == (400, "n")
    [record] = caplog.records
    assert (record.levelno, record.exc_info) == (logging.INFO, None)


def test_a_fatal_stage_failure_is_one_line_per_request_and_hooked(caplog: pytest.LogCaptureFixture) -> None:
    """The stage logged the traceback; each request meeting the dead pipeline logs one line, no traceback."""
    caplog.set_level(logging.INFO, "omni_errors.semantics.reporting")
    fatal: list[OmniErrorDetails] = []
    for i in range(3):
        rebuilt = OmniEngineDeadError(details=fatal_record(stage_id=1, request_id=f"r{i}"))
        report(rebuilt, lambda d: d, where=f"stream r{i}", on_fatal=fatal.append)
    assert [d.request_id for d in fatal] == ["r0", "r1", "r2"]
    assert [(r.levelno, r.exc_info) for r in caplog.records] == [(logging.WARNING, None)] * 3
    assert caplog.records[0].getMessage() == (
        "stream r0 -> 500 InternalServerError (stage 1); logged where the record was made"
    )


def test_a_record_is_reported_as_is(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "omni_errors.semantics.reporting")
    d = OmniErrorDetails("stage 2 timed out", "server", 504, "GatewayTimeoutError", stage_id=2)
    assert report(d, lambda x: x, where="job j1", request_id="j1") is d
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_raw_fallbacks_are_a_keyword_of_the_boundary() -> None:
    assert report(ValueError("x"), lambda d: d.status_code, where="t") == 400
    assert report(ValueError("x"), lambda d: d.status_code, where="t", raw_fallbacks=False) == 500
