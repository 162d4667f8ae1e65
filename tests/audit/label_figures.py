"""Precision and recall of each rule on the hand-labelled vllm-omni 0.30 sample (tests/audit/labels/).

`python tests/audit/label_figures.py` audits the unpacked wheel (`make audit-corpus`) without a cache and
prints one row per rule: the labelled sites, how many the audit reports, precision over the reported
ones and recall over the true ones (tp and fn), on the whole sample and on its `draw` part (the sites of
the files drawn at random, see docs/audit.md). test_audit_vllm_omni.py asserts the same figures.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LABELS = HERE / "labels" / "vllm-omni-0.30.json"


@dataclass
class Figures:
    """One rule's counts on a set of labelled sites."""

    labelled: int = 0
    true: int = 0  # labelled tp or fn: what the rule describes
    found: int = 0  # true sites the audit reports (by fingerprint, or by line for a site once missed)
    reported: int = 0  # labelled sites the audit reports
    reported_true: int = 0

    @property
    def precision(self) -> float | None:
        return self.reported_true / self.reported if self.reported else None

    @property
    def recall(self) -> float | None:
        return self.found / self.true if self.true else None


def labels() -> list[dict[str, str]]:
    rows: list[dict[str, str]] = json.loads(LABELS.read_text(encoding="utf-8"))["labels"]
    return rows


def figures(sites: list[tuple[str, str, str]], rows: list[dict[str, str]]) -> dict[str, Figures]:
    """Per rule, from the report's unsuppressed gated-or-advisory sites as (rule, fingerprint, path:line)."""
    fingerprints = {fp for _, fp, _ in sites}
    lines = {(rule, where) for rule, _, where in sites}
    out: dict[str, Figures] = {}
    for row in rows:
        f = out.setdefault(row["rule"], Figures())
        f.labelled += 1
        is_true = row["label"] in ("tp", "fn")
        reported = (row["fingerprint"] in fingerprints) if row["fingerprint"] else (row["rule"], row["site"]) in lines
        f.true += is_true
        f.found += is_true and reported
        f.reported += reported
        f.reported_true += reported and is_true
    return out


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f} %"


def render(by_rule: dict[str, Figures], title: str) -> str:
    out = [title, f"{'rule':<7}{'labelled':>9}{'true':>6}{'found':>7}{'reported':>10}{'precision':>11}{'recall':>9}"]
    for rule in sorted(by_rule):
        f = by_rule[rule]
        out.append(
            f"{rule:<7}{f.labelled:>9}{f.true:>6}{f.found:>7}{f.reported:>10}"
            f"{_percent(f.precision):>11}{_percent(f.recall):>9}"
        )
    return "\n".join(out)


CLASSES = {
    "helper": "sinks through the tree's own helpers and methods",
    "model": "sinks through response models, SSE frames and locals",
    "handled": "handled, not swallowed (OE202)",
    "reach": "not client-facing: no route reaches it",
    "protocol": "the tree's own protocol errors",
}


def render_classes(sites: list[tuple[str, str, str]], rows: list[dict[str, str]]) -> str:
    """The labelled sites of each class the audit follows the exception for (the rows with a "class")."""
    fingerprints = {fp for _, fp, _ in sites}
    lines = {(rule, where) for rule, _, where in sites}
    out = ["by class", f"{'class':<10}{'true found':>12}{'false reported':>16}  what"]
    for name, title in CLASSES.items():
        found = true = wrong = false = 0
        for row in rows:
            if row.get("class") != name:
                continue
            reported = (
                (row["fingerprint"] in fingerprints) if row["fingerprint"] else (row["rule"], row["site"]) in lines
            )
            if row["label"] in ("tp", "fn"):
                true += 1
                found += reported
            else:
                false += 1
                wrong += reported
        out.append(f"{name:<10}{f'{found} of {true}':>12}{f'{wrong} of {false}':>16}  {title}")
    return "\n".join(out)


def main() -> int:
    sys.path.insert(0, str(HERE))
    from omni_errors_audit import audit
    from vllm_omni_wheel import vllm_omni_tree

    report = audit([vllm_omni_tree()], use_cache=False, progress=False)
    sites = [(s.rule, s.fingerprint, f"{s.key_path}:{s.line}") for s in report.sites if s.suppressed is None]
    rows = labels()
    print(render(figures(sites, rows), f"whole sample ({len(rows)} sites)"))
    drawn = [r for r in rows if r.get("sample") == "draw"]
    if drawn:
        print()
        print(render(figures(sites, drawn), f"files drawn at random ({len(drawn)} sites)"))
    print()
    print(render_classes(sites, rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
