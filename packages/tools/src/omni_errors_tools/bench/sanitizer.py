"""Sanitizer workloads against vLLM's own `sanitize_message` (imported from vLLM), case by case
over labelled corpora, and the first call in a fresh process.

Baselines: the installed vLLM's `sanitize_message`, and that of each other virtual environment
named (`vllm_sanitizers`): vLLM releases cannot share one environment, so another release's
function is loaded from its own installed file (it imports only `regex`), and every release is
measured in the same run, on the same cases, as omni-errors.

Corpora: the shared development corpus (`../shared/sanitizer/dev.jsonl.gz` beside a checkout)
and `tests/sanitizer/realistic.jsonl`, or the paths given. vLLM's regexes backtrack on the
`adversarial` cases for seconds, so each of its calls there runs once, under a time limit.
"""

from __future__ import annotations

import gzip
import importlib.metadata
import importlib.util
import json
import os
import re
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

# The checkout this module runs from (packages/tools/src/omni_errors_tools/bench/): where the corpora
# are. Installed from a wheel there is none, and the defaults name files that do not exist.
_CHECKOUT = Path(__file__).resolve().parents[5]
DEFAULT_CORPORA = (
    _CHECKOUT.parent / "shared" / "sanitizer" / "dev.jsonl.gz",
    _CHECKOUT / "tests" / "sanitizer" / "realistic.jsonl",
)
ADVERSARIAL_LIMIT_S = 5.0
# Where `sanitize_message` lives in every supported vLLM (0.30 to 0.34).
VLLM_SANITIZER_FILE = Path("vllm", "entrypoints", "serve", "exception_handling", "utils.py")
# Other vLLM environments to measure beside the installed vLLM (`make bench` names .venv-vllm034).
ENVIRONMENTS_VARIABLE = "OMNI_ERRORS_BENCH_VLLM_ENVS"

Sanitizer = Callable[[str], str]


def vllm_sanitizer() -> Sanitizer | None:
    """The installed vLLM's `sanitize_message`, or None where vLLM is not installed."""
    try:
        from vllm.entrypoints.serve.exception_handling.utils import sanitize_message
    except ImportError:
        return None
    fn: Sanitizer = sanitize_message
    return fn


def vllm_sanitizers(environments: Iterable[Path] = ()) -> dict[str, Sanitizer]:
    """vLLM's `sanitize_message` by vLLM version, newest first: the installed vLLM's and that of each
    virtual environment in `environments` (a release already found is not loaded twice)."""
    found: dict[str, Sanitizer] = {}
    installed = vllm_sanitizer()
    if installed is not None:
        found[importlib.metadata.version("vllm")] = installed
    for environment in environments:
        version, fn = sanitizer_of(environment)
        found.setdefault(version, fn)
    return dict(sorted(found.items(), key=lambda item: _release(item[0]), reverse=True))


def environments_from_variable() -> list[Path]:
    """The environments `OMNI_ERRORS_BENCH_VLLM_ENVS` names (separated by `os.pathsep`)."""
    return [Path(p) for p in os.environ.get(ENVIRONMENTS_VARIABLE, "").split(os.pathsep) if p]


def sanitizer_of(environment: Path) -> tuple[str, Sanitizer]:
    """The vLLM version and `sanitize_message` installed in the virtual environment `environment`,
    loaded from its own file; ValueError when it has no vLLM."""
    for site in sorted(environment.glob("lib/python3*/site-packages")):
        dist = next(iter(importlib.metadata.distributions(name="vllm", path=[str(site)])), None)
        source = site / VLLM_SANITIZER_FILE
        if dist is None or not source.is_file():
            continue
        spec = importlib.util.spec_from_file_location(f"_vllm_{_release(dist.version)}_sanitizer", source)
        assert spec is not None and spec.loader is not None  # a .py file always has a spec
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fn: Sanitizer = module.sanitize_message
        return dist.version, fn
    missing = f"{environment}: not a virtual environment with vLLM installed (no {VLLM_SANITIZER_FILE})"
    raise ValueError(missing)  # omni-errors: ignore[OE101]: a command-line argument's error, never served


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version)[:3])


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


def per_call(fn: Sanitizer, text: str, *, limit_s: float | None = None) -> float:
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


def _once_within(fn: Sanitizer, text: str, limit_s: float) -> float:
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
    """One case: its id, category, corpus, size, and seconds per call for us and for each vLLM."""

    id: str
    category: str
    corpus: str
    size: int
    ours: float
    vllm: dict[str, float]  # by vLLM version

    def ratio(self, version: str) -> float:
        """How many times faster we are than vLLM `version` (its time over ours)."""
        return self.vllm[version] / self.ours


def time_cases(cases: list[dict[str, Any]], baselines: dict[str, Sanitizer]) -> list[Timing]:
    """Every case timed for omni-errors and for every baseline, in the same run."""
    timings = []
    for c in cases:
        text = c["input"]
        limit = ADVERSARIAL_LIMIT_S if c["category"] == "adversarial" else None
        theirs = {version: per_call(fn, text, limit_s=limit) for version, fn in baselines.items()}
        timings.append(
            Timing(c["id"], c["category"], c["corpus"], len(text.encode()), per_call(sanitize, text), theirs)
        )
    return timings


def summary(timings: list[Timing], version: str) -> dict[str, float]:
    """Against vLLM `version`: the median case ratio without the adversarial cases (vLLM's time there
    is its time limit, not its cost), the slowest case ratio over every case, and the throughput ratio
    and MB/s without the adversarial cases."""
    realistic = [t for t in timings if t.category != "adversarial"]
    ours_s, vllm_s = sum(t.ours for t in realistic), sum(t.vllm[version] for t in realistic)
    return {
        "median_ratio": statistics.median(t.ratio(version) for t in realistic),
        "min_ratio": min(t.ratio(version) for t in timings),
        "throughput_ratio": vllm_s / ours_s,
        "ours_mb_s": sum(t.size for t in realistic) / ours_s / 1e6,
        "vllm_mb_s": sum(t.size for t in realistic) / vllm_s / 1e6,
    }


# Why the ratios are taken on an idle machine (docs/sanitizer.md, "Measured", has the figures).
IDLE_NOTE = (
    "ratios are meant to be read at idle (nothing but this measurement running: a 1-minute load average "
    "under 1.5, this process counting for 1): load slows vLLM's Python regular expressions more than a call "
    "into the extension, so a busy machine flatters omni-errors"
)


def load_line() -> str:
    """The idle note with the load average now, for the output of every ratio table."""
    one, _, _ = os.getloadavg()
    return f"load average now {one:.2f} ({'idle' if one < 1.5 else 'NOT idle'}); {IDLE_NOTE}"


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
