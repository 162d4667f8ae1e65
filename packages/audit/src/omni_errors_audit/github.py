"""`--github`: GitHub Actions workflow commands, which the Actions runner turns into annotations on the
pull request's diff (`::error file=...,line=...::message`).

The new sites of gated rules are errors (they fail the run); with `--list`, the other unsuppressed
sites of non-semantic rules are notices. A summary line closes the output. Workflow-command escaping:
`%`, CR and LF everywhere; also `:` and `,` in properties.
"""

from __future__ import annotations

from omni_errors_audit.baseline import gated
from omni_errors_audit.model import Site
from omni_errors_audit.rules import RULES, SEMANTIC
from omni_errors_audit.runner import AuditReport


def render(report: AuditReport, list_sites: bool = False) -> str:
    out: list[str] = []
    new = 0
    for site in report.sites:
        if site.suppressed is not None or site.rule in SEMANTIC:
            continue
        if gated(site) and site.new:
            new += 1
            out.append(command("error", site))
        elif list_sites:
            out.append(command("notice", site))
    out.append(f"omni-errors audit: {len(report.files):,} files, {new:,} new sites of gated rules")
    return "\n".join(out) + "\n"


def command(level: str, site: Site) -> str:
    rule = RULES[site.rule]
    properties = {
        "file": site.path,
        "line": str(site.line),
        "endLine": str(site.end_line),
        "col": str(site.column),
        "title": f"{site.rule} {rule.name}",
    }
    fields = ",".join(f"{key}={_property(value)}" for key, value in properties.items())
    return f"::{level} {fields}::{_data(site.message.replace('`', ''))}"


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")
