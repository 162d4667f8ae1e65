"""`--sarif`: SARIF 2.1.0 for code-scanning UIs (GitHub code scanning, VS Code's SARIF viewer).

One run; every rule is a `reportingDescriptor`; each site outside the semantic rules is a result with
its fingerprint as `partialFingerprints["omniErrorsAudit/v1"]`, `baselineState` when a baseline was
given, and an `inSource` suppression carrying the comment's reason. Semantic sites measure progress,
not problems: they are counted in the run's properties instead of being listed as results.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from omni_errors_audit.rules import RULES, SEMANTIC
from omni_errors_audit.runner import AuditReport
from omni_errors_audit.table import counts

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/omni-errors/"
FINGERPRINT = "omniErrorsAudit/v2"  # v2: fingerprints from the AST shape (formatting-proof)
SRCROOT = "%SRCROOT%"


def document(report: AuditReport, version: str, exit_code: int) -> dict[str, Any]:
    codes = list(RULES)
    index = {code: i for i, code in enumerate(codes)}
    results = [
        _result(site, index[site.rule], bool(report.baseline)) for site in report.sites if site.rule not in SEMANTIC
    ]
    semantic: dict[str, int] = {}
    for row in counts(report).values():
        for code in SEMANTIC:
            semantic[code] = semantic.get(code, 0) + row.get(code, 0)
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "omni-errors audit",
                        "version": version,
                        "informationUri": INFORMATION_URI,
                        "rules": [_rule(RULES[code]) for code in codes],
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "invocations": [{"executionSuccessful": True, "exitCode": exit_code}],
                "results": results,
                "properties": {
                    "semanticSites": semantic,
                    "files": len(report.files),
                    "unparsable": len(report.unparsable),
                },
            }
        ],
    }


def render(report: AuditReport, version: str, exit_code: int) -> str:
    return json.dumps(document(report, version, exit_code), indent=1, ensure_ascii=False) + "\n"


def _rule(rule: Any) -> dict[str, Any]:
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.title.replace("`", "")},
        "fullDescription": {"text": rule.counts.replace("`", "")},
        "help": {
            "text": f"Counts: {rule.counts} Cannot know: {rule.cannot_know}".replace("`", ""),
            "markdown": f"**Counts.** {rule.counts}\n\n**Cannot know.** {rule.cannot_know}",
        },
        "defaultConfiguration": {"level": rule.level if rule.level != "none" else "note"},
        "properties": {"gated": rule.gated},
    }


def _result(site: Any, rule_index: int, with_baseline: bool) -> dict[str, Any]:
    level = RULES[site.rule].level
    result: dict[str, Any] = {
        "ruleId": site.rule,
        "ruleIndex": rule_index,
        "level": level,
        "message": {"text": site.message.replace("`", "'")},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": _artifact(site.path),
                    "region": {"startLine": site.line, "startColumn": site.column, "endLine": site.end_line},
                }
            }
        ],
        "partialFingerprints": {FINGERPRINT: site.fingerprint},
    }
    if with_baseline and RULES[site.rule].gated:
        result["baselineState"] = "new" if site.new else "unchanged"
    if site.suppressed is not None:
        result["suppressions"] = [{"kind": "inSource", "justification": site.suppressed}]
    return result


def _artifact(path: str) -> dict[str, str]:
    if os.path.isabs(path):
        return {"uri": Path(path).as_uri()}
    return {"uri": quote(path.replace(os.sep, "/")), "uriBaseId": SRCROOT}
