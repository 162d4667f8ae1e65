"""Baselines: the allowlist of known sites, so that CI fails only on new ones (as ruff's and mypy's
baselines do).

A site is known by its fingerprint (rule, file inside the package, enclosing scope, and its statement
text without whitespace or comments), never by line number: moving code, reformatting it or editing
other lines keeps it known. Identical statements in one scope are counted, so a third copy of a known
`raise ValueError(msg)` is new. The file is JSON, one site per line, sorted, so that its diff in review
shows exactly which sites were fixed or allowed.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omni_errors_audit import atomic
from omni_errors_audit.model import AuditInputError, Site
from omni_errors_audit.rules import RULES

if TYPE_CHECKING:
    from omni_errors_audit.runner import AuditReport

FORMAT = "omni-errors-audit-baseline"
VERSION = 2  # 2: fingerprints from the AST shape of a site (version 1 hashed its source text)


def gated(site: Site) -> bool:
    """Sites a baseline records and CI gates: gated rules, not suppressed."""
    return RULES[site.rule].gated and site.suppressed is None


def write(path: Path, report: AuditReport) -> int:
    """Write the report's gated sites as the baseline at `path`; returns how many sites it holds."""
    counts: Counter[str] = Counter()
    first: dict[str, Site] = {}
    for site in filter(gated, report.sites):
        counts[site.fingerprint] += 1
        first.setdefault(site.fingerprint, site)
    by_file: dict[str, list[Site]] = {}
    for site in first.values():
        by_file.setdefault(site.key_path, []).append(site)
    lines = [f'{{"format": "{FORMAT}", "version": {VERSION}, "sites": {sum(counts.values())}, "files": {{']
    for i, key_path in enumerate(sorted(by_file)):
        entries = sorted(by_file[key_path], key=lambda s: (s.rule, s.scope, s.fingerprint))
        lines.append(f"  {json.dumps(key_path)}: [")
        for j, s in enumerate(entries):
            entry = [s.rule, s.fingerprint.partition(":")[2], counts[s.fingerprint], s.scope, s.excerpt]
            lines.append(f"    {json.dumps(entry, ensure_ascii=False)}{',' if j < len(entries) - 1 else ''}")
        lines.append(f"  ]{',' if i < len(by_file) - 1 else ''}")
    lines.append("}}")
    atomic.write_text(path, "\n".join(lines) + "\n")
    return sum(counts.values())


def read(path: Path) -> Counter[str]:
    """fingerprint -> allowed count. Raises AuditInputError for a missing or malformed file."""
    try:
        data: Any = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise AuditInputError(f"baseline file does not exist: {path} (create it with --write-baseline)") from exc
    except (OSError, ValueError) as exc:
        raise AuditInputError(f"cannot read baseline {path}: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("version") != VERSION:
        raise AuditInputError(
            f"{path} is not an omni-errors audit baseline (format {FORMAT} version {VERSION}); "
            "a baseline of an older version is rewritten with --write-baseline"
        )
    allowed: Counter[str] = Counter()
    try:
        for entries in data["files"].values():
            for entry in entries:
                allowed[f"{entry[0]}:{entry[1]}"] += int(entry[2])
    except (AttributeError, KeyError, IndexError, TypeError, ValueError) as exc:
        raise AuditInputError(f"malformed baseline {path}: {exc!r}") from exc
    return allowed


def apply(report: AuditReport, allowed: Counter[str]) -> None:
    """Mark the sites the baseline covers as known; record new/known/fixed counts on the report."""
    left = Counter(allowed)
    sites: list[Site] = []
    new = known = 0
    for site in report.sites:
        if gated(site) and left[site.fingerprint] > 0:
            left[site.fingerprint] -= 1
            known += 1
            site = site._replace(new=False)
        elif gated(site):
            new += 1
        sites.append(site)
    report.sites = sites
    report.baseline = {"new": new, "known": known, "fixed": sum(left.values())}


MASS_FIX = 10  # fixed sites: below this, no run is suspicious


def mass_fix_warning(report: AuditReport) -> str | None:
    """A warning when most of the baseline is "fixed" in one run: more likely the wrong tree than a migration."""
    b = report.baseline
    if not b or b["fixed"] < MASS_FIX or b["fixed"] * 2 <= b["fixed"] + b["known"]:
        return None
    return (
        f"{b['fixed']:,} of the baseline's {b['fixed'] + b['known']:,} sites are fixed at once: is this the tree "
        "(and the package root) the baseline was written for? Fingerprints hold the path inside the package."
    )
