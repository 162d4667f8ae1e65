"""The terminal report: a table of site counts by area (top-level folder) and rule, a legend, totals,
the baseline verdict, and the sites CI must look at."""

from __future__ import annotations

from collections import Counter

from omni_errors.audit.baseline import gated, mass_fix_warning
from omni_errors.audit.model import Site
from omni_errors.audit.rules import RULES, SEMANTIC
from omni_errors.audit.runner import AuditReport


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


def matrix(by_area: dict[str, Counter[str]], codes: list[str]) -> str:
    """Areas as rows, rule codes as columns, with totals."""
    areas = sorted(by_area)
    width = max([len("area"), len("total"), *map(len, areas)])
    cells = [max(len(code), 5) for code in codes]
    rows = [
        "  ".join(["area".ljust(width), *(c.rjust(w) for c, w in zip(codes, cells, strict=True)), "total".rjust(6)])
    ]
    total: Counter[str] = Counter()
    for area in areas:
        row = by_area[area]
        total.update(row)
        rows.append(_row(area, row, codes, width, cells))
    rows.append(_row("total", total, codes, width, cells))
    rows.insert(-1, "-" * len(rows[0]))
    return "\n".join(rows)


def line(site: Site) -> str:
    mark = f"  [suppressed: {site.suppressed}]" if site.suppressed else ""
    return f"{site.path}:{site.line}:{site.column}: {site.rule} {site.message}{mark}"


def _row(name: str, row: Counter[str], codes: list[str], width: int, cells: list[int]) -> str:
    values = [(f"{row[c]:,}" if row[c] else "-").rjust(w) for c, w in zip(codes, cells, strict=True)]
    return "  ".join([name.ljust(width), *values, f"{sum(row.values()):,}".rjust(6)])


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
