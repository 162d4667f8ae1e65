"""Sanitizer benchmarks, side by side with vLLM's own `sanitize_message` (imported from vLLM).

Run: pytest benches/test_bench_sanitize.py --benchmark-only
Baselines: the installed vLLM's `sanitize_message` (`vllm_<version>`), and that of each virtual
environment `OMNI_ERRORS_BENCH_VLLM_ENVS` names (`make bench`: .venv-vllm034, vLLM 0.34), in one run.
Groups: one per payload, the per-call table on real short messages (clean 40 characters, empty,
short, median, long, and the whole set back to back), one per corpus category (the category's
cases run back to back), and the first call in a fresh process. Correctness of each function on
what it ran goes into `extra_info` (what it removed, what it kept).
"""

from __future__ import annotations

import base64
import json
import random
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from omni_errors import sanitize
from omni_errors_tools.bench import sanitizer

BASELINES = sanitizer.vllm_sanitizers(sanitizer.environments_from_variable())
# omni-errors, then each vLLM newest first (none where vLLM is not installed).
IMPLS = ["omni_errors", *(f"vllm_{version}" for version in BASELINES)]


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
    return sanitize if name == "omni_errors" else BASELINES[name.removeprefix("vllm_")]


@pytest.mark.parametrize("impl", IMPLS)
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


# Real error messages as clients get them, mined from vLLM and vLLM-Omni issue threads (each line
# names its thread; names, paths and ids changed). The per-call table: what one call costs on
# the short text most errors are, side by side with vLLM's `sanitize_message`. The same file
# runs case by case in `omni-errors bench --corpus benches/data/real_short_messages.jsonl`.
REAL = [
    json.loads(line)["input"]
    for line in (Path(__file__).parent / "data" / "real_short_messages.jsonl").read_text().splitlines()
    if line.strip()
]
_BY_LENGTH = sorted(REAL, key=len)
PER_CALL: dict[str, str] = {
    "clean_40": "max_tokens must be <= 4096, got 10000 ok",
    "empty": "",
    "short": _BY_LENGTH[len(_BY_LENGTH) // 10],
    "median": _BY_LENGTH[len(_BY_LENGTH) // 2],
    "long": _BY_LENGTH[-1],
}


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("case", list(PER_CALL))
def test_bench_per_call(benchmark: Any, case: str, impl: str) -> None:
    fn = _impl(impl)
    text = PER_CALL[case]
    benchmark.group = f"sanitize per call: {case} ({len(text)} chars)"
    out = benchmark(fn, text)
    benchmark.extra_info.update({"input_chars": len(text), "unchanged": out == text, "same_object": out is text})


@pytest.mark.parametrize("impl", IMPLS)
def test_bench_real_short_messages(benchmark: Any, impl: str) -> None:
    fn = _impl(impl)
    benchmark.group = f"sanitize real short messages, back to back ({len(REAL)} messages)"
    outs = benchmark(lambda: [fn(t) for t in REAL])
    benchmark.extra_info.update(
        {
            "messages": len(REAL),
            "median_chars": len(_BY_LENGTH[len(_BY_LENGTH) // 2]),
            "unchanged": sum(o == t for o, t in zip(outs, REAL, strict=True)),
        }
    )


CASES = sanitizer.load(sanitizer.DEFAULT_CORPORA)
# vLLM's regexes backtrack on the adversarial cases for seconds to minutes: left out here
# (`omni-errors bench` runs each of them once under a time limit).
GROUPS: dict[str, list[dict[str, Any]]] = {}
for _case in CASES:
    if _case["category"] != "adversarial":
        GROUPS.setdefault(f"{_case['corpus'].split('.')[0]}: {_case['category']}", []).append(_case)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("group", sorted(GROUPS) or [pytest.param("none", marks=pytest.mark.skip("no corpus"))])
def test_bench_corpus_category(benchmark: Any, group: str, impl: str) -> None:
    fn = _impl(impl)
    cases = GROUPS[group]
    texts = [c["input"] for c in cases]
    benchmark.group = f"sanitize {group} ({len(texts)} cases, {sum(map(len, texts))} chars)"
    outs = benchmark(lambda: [fn(t) for t in texts])
    remove = sum(len(c["must_remove"]) for c in cases)
    keep = sum(len(c["must_keep"]) for c in cases)
    benchmark.extra_info.update(
        {
            "must_remove": remove,
            "removed": sum(sum(r not in o for r in c["must_remove"]) for c, o in zip(cases, outs, strict=True)),
            "must_keep": keep,
            "kept": sum(sum(k in o for k in c["must_keep"]) for c, o in zip(cases, outs, strict=True)),
        }
    )


def test_bench_first_call_in_a_fresh_process(benchmark: Any) -> None:
    """The timed figure is the subprocess's wall time; the first call itself is in extra_info."""
    benchmark.group = "sanitize: first call in a fresh process (subprocess)"
    firsts: list[float] = []

    def run() -> None:
        firsts.append(sanitizer.first_call()[1])

    benchmark.pedantic(run, rounds=5, iterations=1)
    benchmark.extra_info.update({"first_call_s": firsts, "first_call_median_s": statistics.median(firsts)})


DEV_CORPUS = sanitizer.DEFAULT_CORPORA[0]


@pytest.mark.skipif(not DEV_CORPUS.exists() or not BASELINES, reason="needs the development corpus and vLLM")
def test_bench_dev_corpus_case_by_case(benchmark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Every case of the development corpus, one at a time, against every vLLM of BASELINES in this
    run: the timed figure is the whole measurement; the median and worst ratio per vLLM go into
    `extra_info` and are printed, with the load they were taken at (meant: idle)."""
    cases = sanitizer.load([DEV_CORPUS])
    benchmark.group = f"sanitize {DEV_CORPUS.name}, case by case ({len(cases)} cases, each vLLM beside)"
    timings = benchmark.pedantic(sanitizer.time_cases, args=(cases, BASELINES), rounds=1, iterations=1)
    lines = [f"{DEV_CORPUS.name}, every case ({len(cases)}), omni-errors against each vLLM in this run:"]
    for version in BASELINES:
        s = sanitizer.summary(timings, version)
        worst = min(timings, key=lambda t: t.ratio(version))
        benchmark.extra_info[f"vllm_{version}"] = {**s, "worst_case": worst.id}
        lines.append(
            f"  vLLM {version}: median {s['median_ratio']:.1f}x faster (adversarial aside), "
            f"worst {s['min_ratio']:.2f}x ({worst.id}); target: median >= 20x, never slower"
        )
    lines.append("  " + sanitizer.load_line())
    with capsys.disabled():
        print("\n" + "\n".join(lines))
