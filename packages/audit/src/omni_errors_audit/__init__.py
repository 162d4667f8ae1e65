"""`omni-errors audit`: the RFC's migration inventory of raw raise sites and risky error handling,
with a baseline gate for CI. `docs/audit.md` defines every rule; `docs/migration.md` holds the
inventory of vLLM-Omni 0.30.

Python use::

    from omni_errors_audit import audit
    report = audit(["vllm_omni/"])
    print(sum(1 for s in report.sites if s.rule == "OE101"))

Names are loaded on first use, so `omni-errors` commands that do not audit pay nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["RULES", "AuditInputError", "AuditReport", "Rule", "Site", "audit"]

if TYPE_CHECKING:
    from omni_errors_audit.model import AuditInputError as AuditInputError, Site as Site
    from omni_errors_audit.rules import RULES as RULES, Rule as Rule
    from omni_errors_audit.runner import AuditReport as AuditReport, audit as audit

_HOMES = {
    "AuditInputError": "model",
    "Site": "model",
    "RULES": "rules",
    "Rule": "rules",
    "AuditReport": "runner",
    "audit": "runner",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'omni_errors_audit' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"omni_errors_audit.{home}"), name)
