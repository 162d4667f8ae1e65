"""Side-by-side benchmarks against named baselines, and the tables `omni-errors bench` prints.

The workloads live here once (`codec.py`, `sanitizer.py`); `benches/` runs the same callables
under pytest-benchmark. Every figure is measured in the same run as its baseline.
"""

from __future__ import annotations

import statistics
import timeit
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from omni_errors_tools.bench import sanitizer
from omni_errors_tools.bench.codec import Case, cases, shm_case

__all__ = ["Case", "cases", "codec_table", "measure", "sanitizer_table", "shm_case"]


def measure(fn: Callable[[], Any], *, repeat: int = 5) -> float:
    """Best-of-`repeat` seconds per call."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number


def codec_table() -> tuple[str, bool]:
    """Runs every codec case; returns the Markdown ratio table and whether every target was met."""
    lines = [
        "| group | ours | ns/item | baseline | ns/item | ratio | target | met |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    all_met = True
    with shm_case() as from_shm:
        for case in [*cases(), from_shm]:
            all_met &= _rows(case, lines)
    return "\n".join(lines), all_met


def _rows(case: Case, lines: list[str]) -> bool:
    """Measures one case and appends its table rows; returns whether its targets were met."""
    all_met = True
    ours_name, ours_fn = case.ours
    ours = measure(ours_fn) / case.per_item
    for name, fn in case.baselines.items():
        base = measure(fn) / case.per_item
        ratio = ours / base
        target = case.targets.get(name)
        met = None if target is None else ratio <= target
        all_met &= met is not False
        lines.append(
            f"| {case.group} | {ours_name} | {ours * 1e9:.0f} | {name} | {base * 1e9:.0f} | {ratio:.2f}x | "
            f"{'' if target is None else f'<= {target}x'} | {'' if met is None else ('yes' if met else 'NO')} |"
        )
    floor = case.targets.get("records/s")
    if case.per_item > 1 and floor is not None:
        met = 1 / ours >= floor
        lines.append(
            f"| {case.group} | {ours_name} | | records/s | {1 / ours / 1e6:.2f} M | | >= {floor / 1e6:.0f} M | "
            f"{'yes' if met else 'NO'} |"
        )
        all_met &= met
    return all_met


def sanitizer_table(
    corpora: Iterable[Path] = sanitizer.DEFAULT_CORPORA, vllm_environments: Iterable[Path] = ()
) -> tuple[str, bool]:
    """Every corpus case against each vLLM's sanitizer (the installed one and those of
    `vllm_environments`, newest first), by category, the summary per vLLM, the first call."""
    runs = [sanitizer.first_call() for _ in range(5)]
    imported, first, second = (statistics.median(x) for x in zip(*runs, strict=True))
    first_met = first <= 1e-3
    lines = [
        f"first call in a fresh process (median of 5): {first * 1e6:.0f} us (second call {second * 1e6:.1f} us, "
        f"import {imported * 1e3:.1f} ms); target <= 1 ms: {'yes' if first_met else 'NO'}",
        "",
    ]
    baselines = sanitizer.vllm_sanitizers(vllm_environments)
    cases = sanitizer.load(corpora)
    if not baselines or not cases:
        lines.append("vLLM or the corpora are not available here: no comparison (install vllm; run from a checkout).")
        return "\n".join(lines), first_met
    timings = sanitizer.time_cases(cases, baselines)
    versions = list(baselines)
    lines += [
        "| corpus | category | cases | ours us (total) | "
        + " | ".join(f"vLLM {v} us (total) | ratio (total) | slowest-case ratio" for v in versions)
        + " |",
        "|---|---|---:|---:|" + "---:|---:|---:|" * len(versions),
    ]
    groups: dict[tuple[str, str], list[sanitizer.Timing]] = {}
    for t in timings:
        groups.setdefault((t.corpus, t.category), []).append(t)
    for (corpus, category), ts in sorted(groups.items()):
        ours = sum(t.ours for t in ts)
        cells = []
        for v in versions:
            theirs = sum(t.vllm[v] for t in ts)
            cells.append(f"{_us(theirs)} | {_ratio(theirs / ours)} | {_ratio(min(t.ratio(v) for t in ts))}")
        lines.append(f"| {corpus} | {category} | {len(ts)} | {ours * 1e6:.1f} | " + " | ".join(cells) + " |")
    met = first_met
    lines += ["", sanitizer.load_line()]
    for v in versions:
        s = sanitizer.summary(timings, v)
        met &= s["min_ratio"] >= 1 and s["median_ratio"] >= 20 and s["throughput_ratio"] >= 15
        slowest = min(timings, key=lambda t: t.ratio(v))
        lines += [
            f"vLLM {v}: median case (adversarial aside) {s['median_ratio']:.1f}x faster (target >= 20x); "
            f"slowest case: {slowest.id} "
            f"{slowest.ratio(v):.1f}x (target >= 1x, never slower); throughput without the adversarial cases: "
            f"{s['ours_mb_s']:.1f} MB/s vs {s['vllm_mb_s']:.1f} MB/s = {s['throughput_ratio']:.1f}x (target >= 15x)",
        ]
    return "\n".join(lines), met


def _us(seconds: float) -> str:
    return "timeout" if seconds == float("inf") else f"{seconds * 1e6:.1f}"


def _ratio(r: float) -> str:
    return f"vLLM over {sanitizer.ADVERSARIAL_LIMIT_S:.0f} s" if r == float("inf") else f"{r:.1f}x"
