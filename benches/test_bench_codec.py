"""pytest-benchmark view of the codec workloads in `omni_errors_tools.bench`: one group per operation
(the sample record, then realistic records), each with its baselines side by side in the same run."""

from __future__ import annotations

from typing import Any

import pytest
from omni_errors_tools import bench

CASES = bench.cases()
PARAMS = [
    pytest.param(case, name, fn, id=f"{case.group}|{name}")
    for case in CASES
    for name, fn in [case.ours, *case.baselines.items()]
]


@pytest.mark.parametrize(("case", "name", "fn"), PARAMS)
def test_codec(benchmark: Any, case: bench.Case, name: str, fn: Any) -> None:
    benchmark.group = case.group
    benchmark.extra_info["per_item"] = case.per_item
    result = benchmark(fn)
    if name == case.ours[0] and case.expected is not None:
        # Correctness travels with the number: the measured call produced the records.
        assert result == case.expected
        benchmark.extra_info["correct"] = True


def test_decode_from_shm_view(benchmark: Any) -> None:
    with bench.shm_case() as case:
        benchmark.group = case.group
        assert benchmark(case.ours[1]) == case.expected
        benchmark.extra_info["correct"] = True


def test_decode_from_shm_view_msgspec(benchmark: Any) -> None:
    with bench.shm_case() as case:
        benchmark.group = case.group
        (baseline,) = case.baselines.values()
        benchmark(baseline)
