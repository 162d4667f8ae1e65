"""The three outputs: the terminal table, `--json` and SARIF 2.1.0 (validated against the schema)."""

from __future__ import annotations

import json

import jsonschema
from audit_helpers import AuditSnippets
from omni_errors_audit import json_report, sarif, table
from omni_errors_audit.rules import RULES
from sarif_schema import SARIF_2_1_0

FILES = {
    "api/__init__.py": "",
    "api/routes.py": """\
    from fastapi import HTTPException

    def handle(g):
        try:
            return g()
        except ValueError as exc:
            raise HTTPException(400, detail=str(exc)) from exc
    """,
    "engine/core.py": """\
    import os
    from vllm.exceptions import VLLMValidationError

    def step(x):
        if x is None:
            raise VLLMValidationError("x is required", parameter="x")
        if x < 0:
            raise ValueError("negative")  # omni-errors: ignore[OE101]: internal invariant, tested
        os._exit(1)
    """,
    "broken.py": "def f(:\n",
}


def test_table_by_area_and_rule(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(FILES)
    assert {area: dict(row) for area, row in table.counts(report).items()} == {
        "(top)": {"OE000": 1},
        "api": {"OE201": 1, "OE205": 1},
        "engine": {"OE301": 1, "OE901": 1},
    }
    text = table.render(report)
    lines = text.splitlines()
    assert lines[0].startswith("omni-errors audit: 5 files (")  # with pkg/__init__.py
    assert "4 parsed, 1 unparsable" in lines[0]
    assert lines[1].startswith("  unparsable: ") and "broken.py: syntax error" in lines[1]
    header = next(line for line in lines if line.startswith("area"))
    assert header.split() == ["area", "(OE)", "000", "201", "205", "301", "901", "total"]
    assert next(line for line in lines if line.startswith("api ")).split() == ["api", "-", "1", "1", "-", "-", "2"]
    assert next(line for line in lines if line.startswith("total")).split() == ["total", "1", "1", "1", "1", "1", "5"]
    assert "  OE201  value-error-as-4xx: `except ValueError` that answers 4xx" in lines
    assert "raw raise sites: 0; semantic raise sites: 1 (the RFC's measure of progress)" in lines
    assert "suppressed with a reason: 1" in lines


def test_json_report(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(FILES)
    doc = json.loads(json_report.render(report, "9.9.9"))
    assert doc["tool"] == {"name": "omni-errors audit", "version": "9.9.9"}
    assert doc["files"]["total"] == 5 and doc["files"]["parsed"] == 4 and doc["files"]["unparsable"] == 1
    assert doc["unparsable"][0]["error"].startswith("syntax error")
    assert set(doc["rules"]) == set(RULES)
    assert doc["rules"]["OE201"]["count"] == 1 and doc["rules"]["OE101"]["count"] == 0
    assert doc["by_area"]["engine"] == {"OE301": 1, "OE901": 1}
    assert doc["raised_classes"] == {
        "vllm.exceptions.VLLMValidationError": 1,
        "fastapi.HTTPException": 1,
        "builtins.ValueError": 1,
    }
    suppressed = [s for s in doc["sites"] if s["suppressed"]]
    assert [(s["rule"], s["suppressed"]) for s in suppressed] == [("OE101", "internal invariant, tested")]
    site = next(s for s in doc["sites"] if s["rule"] == "OE201")
    assert site["key_path"] == "pkg/api/routes.py" and site["area"] == "api" and site["line"] == 6
    assert site["fingerprint"].startswith("OE201:") and site["new"] is True
    assert next(s for s in doc["sites"] if s["rule"] == "OE901")["new"] is None  # progress, never gated


def test_sarif_validates_against_the_sarif_2_1_0_schema(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(FILES)
    doc = json.loads(sarif.render(report, "9.9.9", exit_code=1))
    jsonschema.validate(doc, SARIF_2_1_0, format_checker=jsonschema.FormatChecker())
    run = doc["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == list(RULES)
    results = {r["ruleId"]: r for r in run["results"]}
    assert set(results) == {"OE000", "OE101", "OE201", "OE205", "OE301"}  # semantic sites are not problems
    assert run["properties"]["semanticSites"] == {"OE901": 1, "OE902": 0}
    rule_index = results["OE201"]["ruleIndex"]
    assert run["tool"]["driver"]["rules"][rule_index]["id"] == "OE201"
    location = results["OE201"]["locations"][0]["physicalLocation"]
    assert location["region"] == {"startLine": 6, "startColumn": 5, "endLine": 6}
    assert location["artifactLocation"]["uri"].endswith("pkg/api/routes.py")
    assert results["OE101"]["suppressions"] == [{"kind": "inSource", "justification": "internal invariant, tested"}]
    assert results["OE201"]["partialFingerprints"]["omniErrorsAudit/v2"].startswith("OE201:")
    assert run["invocations"] == [{"executionSuccessful": True, "exitCode": 1}]


def test_sarif_schema_rejects_what_sarif_forbids() -> None:
    """The schema subset is not vacuous: a result without a message, or an unknown level, is refused."""
    base = {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"message": {"text": "m"}}]}]}
    jsonschema.validate(base, SARIF_2_1_0)
    for broken in (
        {"version": "2.1.0", "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"ruleId": "A"}]}]},
        {
            "version": "2.1.0",
            "runs": [{"tool": {"driver": {"name": "x"}}, "results": [{"message": {"text": "m"}, "level": "fatal"}]}],
        },
        {"version": "2.0.0", "runs": []},
        {"version": "2.1.0", "runs": [{"tool": {"driver": {}}}]},
    ):
        try:
            jsonschema.validate(broken, SARIF_2_1_0)
        except jsonschema.ValidationError:
            continue
        raise AssertionError(f"accepted invalid SARIF: {broken}")
