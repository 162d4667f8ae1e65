"""Sanitizer workloads against vLLM's own `sanitize_message` (imported from vLLM), case by case
over labelled corpora, and the first call in a fresh process.

Corpora: the shared development corpus (`../shared/sanitizer/dev.jsonl.gz` beside a checkout)
and `tests/sanitizer/realistic.jsonl`, or the paths given. vLLM's regexes backtrack on the
`adversarial` cases for seconds, so each of its calls there runs once, under a time limit.
"""

from __future__ import annotations

import gzip
import json
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_errors import sanitize

_REPO = Path(__file__).resolve().parents[3]
DEFAULT_CORPORA = (
    _REPO.parent / "shared" / "sanitizer" / "dev.jsonl.gz",
    _REPO / "tests" / "sanitizer" / "realistic.jsonl",
)
ADVERSARIAL_LIMIT_S = 5.0


def vllm_sanitizer() -> Callable[[str], str] | None:
    """vLLM's `sanitize_message`, or None where vLLM is not installed."""
    try:
        from vllm.entrypoints.serve.exception_handling.utils import sanitize_message
    except ImportError:
        return None
    fn: Callable[[str], str] = sanitize_message
    return fn


def load(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The cases of every corpus that exists, each tagged with its corpus's file name."""
    cases = []
    for path in paths:
        if not path.exists():
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as f:
            cases += [{**json.loads(line), "corpus": path.name} for line in f if line.strip()]
    return cases


def per_call(fn: Callable[[str], str], text: str, *, limit_s: float | None = None) -> float:
    """Best-of-3 seconds per call of `fn(text)`; one call under `limit_s` (inf when exceeded)."""
    if limit_s is not None:
        return _once_within(fn, text, limit_s)
    number = max(3, min(2000, int(200_000 / (len(text) + 50))))
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(number):
            fn(text)
        best = min(best, (time.perf_counter() - start) / number)
    return best


class _Timeout(Exception):
    pass


def _once_within(fn: Callable[[str], str], text: str, limit_s: float) -> float:
    def alarm(signum: int, frame: Any) -> None:
        raise _Timeout

    old = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    start = time.perf_counter()
    try:
        fn(text)
        return time.perf_counter() - start
    except _Timeout:
        return float("inf")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


@dataclass(frozen=True)
class Timing:
    """One case: its id, category, corpus, size, and seconds per call for us and for vLLM."""

    id: str
    category: str
    corpus: str
    size: int
    ours: float
    vllm: float

    @property
    def ratio(self) -> float:
        """How many times faster we are (vLLM's time over ours)."""
        return self.vllm / self.ours


def time_cases(cases: list[dict[str, Any]], vllm: Callable[[str], str]) -> list[Timing]:
    """Every case timed for both sanitizers, in the same run."""
    timings = []
    for c in cases:
        text = c["input"]
        limit = ADVERSARIAL_LIMIT_S if c["category"] == "adversarial" else None
        timings.append(
            Timing(
                c["id"],
                c["category"],
                c["corpus"],
                len(text.encode()),
                per_call(sanitize, text),
                per_call(vllm, text, limit_s=limit),
            )
        )
    return timings


def summary(timings: list[Timing]) -> dict[str, float]:
    """Median and slowest case ratio, and throughput ratio and MB/s on the non-adversarial cases."""
    realistic = [t for t in timings if t.category != "adversarial"]
    ours_s, vllm_s = sum(t.ours for t in realistic), sum(t.vllm for t in realistic)
    return {
        "median_ratio": statistics.median(t.ratio for t in timings),
        "min_ratio": min(t.ratio for t in timings),
        "throughput_ratio": vllm_s / ours_s,
        "ours_mb_s": sum(t.size for t in realistic) / ours_s / 1e6,
        "vllm_mb_s": sum(t.size for t in realistic) / vllm_s / 1e6,
    }


FIRST_CALL_TEXT = (
    "worker at 0x7f3a2b1c9d40 failed reading /home/alice/models/config.json: api_key=sk-live-0123456789abcdefghij"
)

_FIRST_CALL_SCRIPT = """
import time, sys
t0 = time.perf_counter()
import omni_errors
t1 = time.perf_counter()
out = omni_errors.sanitize(sys.argv[1])
t2 = time.perf_counter()
omni_errors.sanitize(sys.argv[1])
t3 = time.perf_counter()
assert "sk-live" not in out
print(t1 - t0, t2 - t1, t3 - t2)
"""


def first_call() -> tuple[float, float, float]:
    """In a fresh interpreter: seconds to import omni_errors, for the first sanitize call (a
    message every rule family sees), and for the second."""
    out = subprocess.run(
        [sys.executable, "-c", _FIRST_CALL_SCRIPT, FIRST_CALL_TEXT],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    imported, first, second = (float(x) for x in out.stdout.split())
    return imported, first, second
