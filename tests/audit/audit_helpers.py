"""Small helpers shared by the audit tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from omni_errors_audit import AuditReport

WriteTree = Callable[[dict[str, str]], Path]
AuditSnippets = Callable[..., AuditReport]


def rule_lines(report: AuditReport, *rules: str) -> list[tuple[str, int]]:
    """(rule, line) of every site of `rules` (all rules when none given), in line order."""
    return sorted((s.rule, s.line) for s in report.sites if not rules or s.rule in rules)


def messages(report: AuditReport, rule: str) -> list[str]:
    return [s.message for s in report.sites if s.rule == rule]
