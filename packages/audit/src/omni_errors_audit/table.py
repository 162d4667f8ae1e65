"""The terminal report: a table of site counts by area (top-level folder) and rule, a legend, totals,
the baseline verdict, and the sites CI must look at."""

from __future__ import annotations

from collections import Counter

from omni_errors_audit.baseline import gated, mass_fix_warning
from omni_errors_audit.model import Site
from omni_errors_audit.rules import RULES, SEMANTIC
from omni_errors_audit.runner import AuditReport


def counts(report: AuditReport) -> dict[str, Counter[str]]:
    """area -> rule -> count of unsuppressed sites."""
    table: dict[str, Counter[str]] = {}
    for site in report.sites:
        if site.suppressed is None:
            table.setdefault(site.area, Counter())[site.rule] += 1
    return table


def render(report: AuditReport, list_sites: bool = False, failing: bool = False) -> str:
    """The whole terminal report; the new sites are listed when a baseline was given or the run fails."""
    out = [_summary(report)]
    out.extend(f"  unparsable: {f.display}: {error}" for f, error in report.unparsable)
    out.append("")
    by_area = counts(report)
    codes = sorted({code for c in by_area.values() for code in c})
    if codes:
        out.append(matrix(by_area, codes))
        out.append("")
        out.extend(f"  {code}  {RULES[code].name}: {RULES[code].title}" for code in codes)
        out.append("")
    total = Counter[str]()
    for c in by_area.values():
        total.update(c)
    raw = sum(total[c] for c in ("OE101", "OE102", "OE103", "OE104", "OE105"))
    semantic = sum(total[c] for c in SEMANTIC)
    out.append(f"raw raise sites: {raw:,}; semantic raise sites: {semantic:,} (the RFC's measure of progress)")
    suppressed = sum(1 for s in report.sites if s.suppressed is not None)
    if suppressed:
        out.append(f"suppressed with a reason: {suppressed:,}")
    shown = [s for s in report.sites if gated(s) and s.new] if report.baseline or failing else []
    if report.baseline:
        b = report.baseline
        out.append(f"baseline: {b['new']:,} new, {b['known']:,} known, {b['fixed']:,} fixed")
        if b["fixed"]:
            out.append("  fixed sites are still allowed: rerun with --write-baseline to tighten the baseline")
        warning = mass_fix_warning(report)
        if warning:
            out.append(f"  warning: {warning}")
    if shown:
        out.append(f"new sites of gated rules: {len(shown):,}")
    if list_sites:
        shown = report.sites
    if shown:
        out.append("")
        out.extend(line(s) for s in shown)
    return "\n".join(out) + "\n"


WIDTH = 100  # columns: a table wider than this is split into blocks of rule columns


def matrix(by_area: dict[str, Counter[str]], codes: list[str]) -> str:
    """Areas as rows, rule codes as columns (headed by their number: `101` is OE101), with totals;
    each column as wide as its widest cell, and split into blocks that fit WIDTH columns."""
    areas = sorted(by_area)
    total: Counter[str] = Counter()
    for area in areas:
        total.update(by_area[area])
    width = max([len("area (OE)"), len("total"), *map(len, areas)])
    cells = {c: max(len(c) - 2, len(f"{total[c]:,}")) for c in codes}
    grand = len(f"{sum(total.values()):,}")
    blocks: list[list[str]] = [[]]
    used = width + 2 + max(grand, 5)
    for code in codes:
        if blocks[-1] and used + 2 + cells[code] > WIDTH:
            blocks.append([])
            used = width + 2 + max(grand, 5)
        blocks[-1].append(code)
        used += 2 + cells[code]
    out = []
    for i, block in enumerate(blocks):
        last = i == len(blocks) - 1
        out.append(_block(by_area, areas, total, block, width, cells, max(grand, 5) if last else 0))
    return "\n\n".join(out)


def _block(
    by_area: dict[str, Counter[str]],
    areas: list[str],
    total: Counter[str],
    codes: list[str],
    width: int,
    cells: dict[str, int],
    total_width: int,
) -> str:
    head = ["area (OE)".ljust(width), *(c[2:].rjust(cells[c]) for c in codes)]
    rows = ["  ".join([*head, "total".rjust(total_width)] if total_width else head)]
    for area in [*areas, "total"]:
        row = total if area == "total" else by_area[area]
        values = [(f"{row[c]:,}" if row[c] else "-").rjust(cells[c]) for c in codes]
        if total_width:
            values.append(f"{sum(row.values()):,}".rjust(total_width))
        rows.append("  ".join([area.ljust(width), *values]))
    rows.insert(-1, "-" * len(rows[0]))
    return "\n".join(rows)


def line(site: Site) -> str:
    mark = f"  [suppressed: {site.suppressed}]" if site.suppressed else ""
    return f"{site.path}:{site.line}:{site.column}: {site.rule} {site.message}{mark}"


def _summary(report: AuditReport) -> str:
    n = len(report.files)
    parsed = n - len(report.unparsable)
    parts = [
        f"omni-errors audit: {n:,} files ({report.lines:,} lines): {parsed:,} parsed, "
        f"{len(report.unparsable):,} unparsable"
    ]
    if report.excluded:
        parts.append(f"{report.excluded:,} excluded by --exclude")
    parts.append(f"{report.seconds:.2f} s on {report.jobs} process{'es' if report.jobs > 1 else ''}")
    if report.from_cache:
        parts.append(f"{report.from_cache:,} from cache")
    return "; ".join(parts)
