"""Sanitizer benchmarks, side by side with vLLM's own `sanitize_message` (imported from vLLM).

Run: pytest benches/test_bench_sanitize.py --benchmark-only
Groups: one per payload; in each, `omni_errors` and `vllm_baseline`. Correctness of each
function on that payload goes into `extra_info` (what it removed, what it kept).
"""

from __future__ import annotations

import base64
import gzip
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omni_errors import sanitize

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "sanitizer"


def _vllm_sanitize() -> Callable[[str], str]:
    mod = pytest.importorskip("vllm.entrypoints.serve.exception_handling.utils")
    return mod.sanitize_message  # type: ignore[no-any-return]


CLEAN_120 = (
    "Request was cancelled by the client before stage 2 (code2wav) started; "
    "retry later with a smaller max_tokens value."
)[:120]

TRACEBACK_2K = (
    "Traceback (most recent call last):\n"
    + "".join(
        f'  File "/opt/conda/lib/python3.10/site-packages/vllm/v1/engine/core_{i}.py", line {600 + i}, '
        f"in run_engine_core\n    raise e\n"
        for i in range(40)
    )
)[:2000] + "\nValueError: max_tokens must be <= 4096, got 10000"

_rng = random.Random(0)
_IMAGE = base64.b64encode(_rng.randbytes(48_000)).decode()
REPR_64K = (
    "1 validation error:\n  {'type': 'string_too_long', 'loc': ('body', 'messages', 0, 'content', 0, "
    "'image_url', 'url'), 'msg': 'String should have at most 65536 characters', "
    "'input': 'data:image/png;base64," + _IMAGE + "'}"
)[: 64 * 1024 - 2] + "'}"

PAYLOADS: dict[str, tuple[str, list[str], list[str]]] = {
    # name: (text, must be removed, must be kept)
    "clean_120": (CLEAN_120, [], [CLEAN_120]),
    "traceback_2k": (TRACEBACK_2K, ['File "/opt/conda', "raise e"], ["ValueError: max_tokens must be <= 4096"]),
    "repr_64k": (REPR_64K, [_IMAGE[:64]], ["String should have at most 65536 characters"]),
}


def _impl(name: str) -> Callable[[str], str]:
    return sanitize if name == "omni_errors" else _vllm_sanitize()


@pytest.mark.parametrize("impl", ["omni_errors", "vllm_baseline"])
@pytest.mark.parametrize("payload", sorted(PAYLOADS))
def test_bench_payload(benchmark: Any, payload: str, impl: str) -> None:
    fn = _impl(impl)
    text, remove, keep = PAYLOADS[payload]
    benchmark.group = f"sanitize {payload} ({len(text)} chars)"
    out = benchmark(fn, text)
    benchmark.extra_info.update(
        {
            "input_chars": len(text),
            "output_chars": len(out),
            "removed": sum(r not in out for r in remove),
            "must_remove": len(remove),
            "kept": sum(k in out for k in keep),
            "must_keep": len(keep),
        }
    )


def _corpus() -> list[dict[str, Any]]:
    path = SHARED / "dev.jsonl.gz"
    if not path.exists():
        pytest.skip("shared corpus not found")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.parametrize("impl", ["omni_errors", "vllm_baseline"])
def test_bench_dev_corpus(benchmark: Any, impl: str) -> None:
    fn = _impl(impl)
    # The `adversarial` cases are left out: vLLM's regexes backtrack on them for seconds to minutes.
    cases = [c for c in _corpus() if c["category"] != "adversarial"]
    texts = [c["input"] for c in cases]
    benchmark.group = f"sanitize dev corpus ({len(texts)} cases, {sum(map(len, texts))} chars)"

    def run() -> list[str]:
        return [fn(t) for t in texts]

    outs = benchmark.pedantic(run, rounds=5, iterations=1, warmup_rounds=1)
    remove = sum(len(c["must_remove"]) for c in cases)
    removed = sum(sum(r not in o for r in c["must_remove"]) for c, o in zip(cases, outs, strict=True))
    keep = sum(len(c["must_keep"]) for c in cases)
    kept = sum(sum(k in o for k in c["must_keep"]) for c, o in zip(cases, outs, strict=True))
    benchmark.extra_info.update(
        {"must_remove": remove, "removed": removed, "must_keep": keep, "kept": kept, "recall": removed / remove}
    )
