"""`--json`: the whole audit as one JSON document (schema described in docs/audit.md)."""

from __future__ import annotations

import json
from typing import Any

from omni_errors_audit.rules import RULES
from omni_errors_audit.runner import AuditReport
from omni_errors_audit.table import counts

SCHEMA_VERSION = 1


def document(report: AuditReport, version: str) -> dict[str, Any]:
    """The report as plain JSON values."""
    by_area = counts(report)
    totals: dict[str, int] = {}
    for row in by_area.values():
        for code, n in row.items():
            totals[code] = totals.get(code, 0) + n
    return {
        "schema": SCHEMA_VERSION,
        "tool": {"name": "omni-errors audit", "version": version},
        "roots": report.roots,
        "files": {
            "total": len(report.files),
            "parsed": len(report.files) - len(report.unparsable),
            "unparsable": len(report.unparsable),
            "excluded": report.excluded,
            "from_cache": report.from_cache,
            "lines": report.lines,
        },
        "unparsable": [{"path": f.display, "error": error} for f, error in report.unparsable],
        "rules": {
            code: {
                "name": r.name,
                "title": r.title,
                "gated": r.gated,
                "level": r.level,
                "count": totals.get(code, 0),
            }
            for code, r in RULES.items()
        },
        "by_area": {area: dict(sorted(row.items())) for area, row in sorted(by_area.items())},
        "raised_classes": report.raised_classes,
        "reraises": report.reraises,
        "baseline": report.baseline or None,
        "seconds": round(report.seconds, 3),
        "sites": [
            {
                "rule": s.rule,
                "path": s.path,
                "key_path": s.key_path,
                "area": s.area,
                "line": s.line,
                "column": s.column,
                "end_line": s.end_line,
                "scope": s.scope,
                "message": s.message,
                "excerpt": s.excerpt,
                "fingerprint": s.fingerprint,
                "suppressed": s.suppressed,
                "new": s.new if RULES[s.rule].gated else None,
            }
            for s in report.sites
        ],
    }


def render(report: AuditReport, version: str) -> str:
    return json.dumps(document(report, version), indent=1, ensure_ascii=False) + "\n"
