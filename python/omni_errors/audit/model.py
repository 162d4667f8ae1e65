"""Data the audit passes around: what one file yields (cached, sent between processes) and final sites.

Per-file records are NamedTuples of plain values so that they pickle cheaply to the parent process and
round-trip through the JSON cache; `Site` is the reported, path-qualified form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from omni_errors.errors import OmniErrorsError


class AuditInputError(OmniErrorsError, ValueError):
    """A path or package given to the audit does not exist."""


class RawSite(NamedTuple):
    """A site found in one file, before paths, suppressions and fingerprints are applied."""

    rule: str
    line: int
    column: int  # 1-based, in code points
    end_line: int
    scope: str
    digest: str  # hash of key path, scope and whitespace-free source text: see source.py
    excerpt: str
    message: str


class RawRaise(NamedTuple):
    """A `raise` of a named class (or of an unresolved value, `target == ""`), classified project-wide."""

    line: int
    column: int
    end_line: int
    scope: str
    digest: str
    excerpt: str
    target: str  # qualified name of what is raised or called; "" when it cannot be known
    detail: str  # how it was resolved, for the message ("bound to ValueError(...) at line 3")


class Forwarded(NamedTuple):
    """Exception text passed to a function of the audited tree (OE205 when that function sends it on)."""

    callee: str  # last name of the callee: `_send_error` for `self._send_error(ws, str(e))`
    position: int  # positional index of the argument, -1 for a keyword
    keyword: str  # the keyword, "" for a positional argument
    in_sink: bool  # the call is itself an argument of a client sink (`send_json(payload(str(e)))`)
    site: RawSite  # the OE205 site it becomes


class Unanswered(NamedTuple):
    """An `except ValueError` clause that calls functions of unknown status (OE201 when one defaults to 4xx)."""

    callees: tuple[str, ...]  # last names of the calls made without a status argument
    site: RawSite  # the OE201 site it becomes (message filled in by the project pass)


class Suppression(NamedTuple):
    """A valid `# omni-errors: ignore[CODES]: reason` comment."""

    line: int
    codes: tuple[str, ...]
    reason: str


@dataclass(slots=True)
class FileResult:
    """Everything the audit learns from one file; a pure function of (module name, content)."""

    module: str
    lines: int
    sites: list[RawSite]
    raises: list[RawRaise]
    classes: dict[str, list[str]]  # qualified name -> resolved base names
    aliases: dict[str, str]  # module-level imported name (qualified) -> what it names
    functions: list[str]  # qualified names of functions defined at module or class level
    suppressions: list[Suppression]
    reraises: int = 0
    error: str | None = None  # set for an unparsable file; its OE000 site is in `sites`
    # What the project pass follows one call deep (see project.py): functions whose parameter reaches a
    # client sink (name -> [[position, parameter]]), whose status parameter defaults to a 4xx, every
    # function name defined, and the calls that hand them exception text or leave a status to them.
    client_params: dict[str, list[list[Any]]] = field(default_factory=dict)
    status_defaults: dict[str, int] = field(default_factory=dict)
    defined: list[str] = field(default_factory=list)
    forwarded: list[Forwarded] = field(default_factory=list)
    unanswered: list[Unanswered] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "module": self.module,
            "lines": self.lines,
            "sites": [list(s) for s in self.sites],
            "raises": [list(r) for r in self.raises],
            "classes": self.classes,
            "aliases": self.aliases,
            "functions": self.functions,
            "suppressions": [[s.line, list(s.codes), s.reason] for s in self.suppressions],
            "reraises": self.reraises,
            "error": self.error,
            "client_params": self.client_params,
            "status_defaults": self.status_defaults,
            "defined": self.defined,
            "forwarded": [[*f[:4], list(f.site)] for f in self.forwarded],
            "unanswered": [[list(u.callees), list(u.site)] for u in self.unanswered],
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FileResult:
        return cls(
            module=data["module"],
            lines=data["lines"],
            sites=[RawSite(*s) for s in data["sites"]],
            raises=[RawRaise(*r) for r in data["raises"]],
            classes=data["classes"],
            aliases=data["aliases"],
            functions=data["functions"],
            suppressions=[Suppression(s[0], tuple(s[1]), s[2]) for s in data["suppressions"]],
            reraises=data["reraises"],
            error=data["error"],
            client_params=data["client_params"],
            status_defaults=data["status_defaults"],
            defined=data["defined"],
            forwarded=[Forwarded(f[0], f[1], f[2], f[3], RawSite(*f[4])) for f in data["forwarded"]],
            unanswered=[Unanswered(tuple(u[0]), RawSite(*u[1])) for u in data["unanswered"]],
        )


class Site(NamedTuple):
    """One reported site."""

    rule: str
    path: str  # as the user sees it: relative to the working directory when inside it
    key_path: str  # inside the audited root, prefixed by its name: the baseline's path (location-independent)
    area: str  # top-level folder under the root ("(top)" for files directly in it)
    line: int
    column: int
    end_line: int
    scope: str
    excerpt: str
    message: str
    fingerprint: str  # "OE101:<digest>": what a baseline matches
    suppressed: str | None = None  # the suppression's reason
    new: bool = True  # False when the baseline covers it


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file to audit: where it is and what it is called."""

    path: str  # absolute
    display: str
    key_path: str
    area: str
    module: str
    is_package: bool  # an `__init__.py`: its relative imports start from itself
