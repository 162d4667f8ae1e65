"""The vLLM-free core table (torch-only stages) and the full table agree; the lifecycle's records.

`classify` is the core table extended with vLLM's rows, so these check that no vLLM row shadows a
core row for what a stage can raise. Lives with the semantics tests because it needs vLLM; the
lifecycle suite itself never imports vLLM (15-60 s per process on these machines).
"""

from __future__ import annotations

import omni_errors
import pytest
import torch
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.fatal.policy import fatal_cause
from omni_errors.semantics.classification import classify
from omni_errors.semantics.core_table import (
    DEAD_MESSAGE,
    classify_core,
    fatal_record,
    timeout_record,
    unavailable_record,
)
from omni_errors.semantics.exceptions import OmniEngineDeadError, OmniServiceUnavailableError, OmniStageTimeoutError
from torch._inductor.exc import InductorError
from vllm.v1.engine.exceptions import EngineDeadError


@pytest.mark.skipif(not hasattr(EngineDeadError, "CLIENT_MESSAGE"), reason="vLLM 0.30 names no client message")
def test_dead_message_is_vllms_client_message() -> None:
    assert DEAD_MESSAGE == EngineDeadError.CLIENT_MESSAGE


def _wrapped_oom() -> BaseException:
    try:
        raise torch.OutOfMemoryError("CUDA out of memory")
    except torch.OutOfMemoryError as oom:
        try:
            raise RuntimeError("Diffusion generation failed") from oom
        except RuntimeError as wrapped:
            return wrapped


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("stage kernel failed"),
        RuntimeError("[enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"),
        ValueError("unsupported prompt"),
        KeyError("k"),
        RuntimeError(""),
        ValueError(""),
        TypeError("bad type"),
        OverflowError("too big"),
        NotImplementedError("later"),
        TimeoutError("stage wait expired"),
        omni_errors.DecodeError("frame truncated"),
        Exception(3),
        torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        torch.cuda.OutOfMemoryError("CUDA out of memory"),
        InductorError(AssertionError("'XBLOCK' too large. Maximum: 4096. Actual: 8192"), None),
        _wrapped_oom(),
    ],
    ids=repr,
)
@pytest.mark.parametrize("raw_fallbacks", [True, False])
@pytest.mark.parametrize("stage_id", [2, None])
def test_core_table_matches_classify(exc: BaseException, raw_fallbacks: bool, stage_id: int | None) -> None:
    expected = classify(exc, request_id="r1", stage_id=stage_id, raw_fallbacks=raw_fallbacks)
    assert classify_core(exc, request_id="r1", stage_id=stage_id, raw_fallbacks=raw_fallbacks) == expected


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (torch.OutOfMemoryError("oom"), ExitCode.OOM),
        (_wrapped_oom(), ExitCode.OOM),
        (InductorError(AssertionError("x"), None), ExitCode.FATAL_ENGINE),
        (EngineDeadError(), ExitCode.FATAL_ENGINE),
        (OmniEngineDeadError(stage_id=1), ExitCode.FATAL_ENGINE),
        (RuntimeError("x"), None),
    ],
    ids=repr,
)
def test_fatal_cause_by_type(exc: BaseException, code: ExitCode | None) -> None:
    found = fatal_cause(exc)
    assert (found[1] if found else None) == code


def test_lifecycle_records_match_the_omni_exceptions() -> None:
    assert fatal_record(stage_id=3) == classify(OmniEngineDeadError(stage_id=3))
    assert timeout_record("Stage 1 stopped responding", stage_id=1) == classify(
        OmniStageTimeoutError("Stage 1 stopped responding", stage_id=1)
    )
    assert unavailable_record("The server is shutting down", stage_id=None) == classify(
        OmniServiceUnavailableError("The server is shutting down")
    )


def test_supervisor_default_error_factory_raises_the_semantic_exception() -> None:
    from omni_errors_tools.lifecycle.supervisor_types import default_error_factory

    dead = fatal_record(stage_id=1, request_id="r1")
    exc = default_error_factory(dead)
    assert isinstance(exc, EngineDeadError) and exc.details == dead  # type: ignore[attr-defined]
    timeout = timeout_record("Stage 1 stopped responding", stage_id=1)
    assert default_error_factory(timeout).details == timeout  # type: ignore[attr-defined]
