"""Data the audit passes around: what one file yields (cached, sent between processes) and final sites.

Per-file records are NamedTuples of plain values so that they pickle cheaply to the parent process and
round-trip through the JSON cache; `Site` is the reported, path-qualified form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class AuditInputError(ValueError):
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
    """Exception text passed to a function or class of the audited tree (OE205 when it sends it on)."""

    callee: str  # a callee reference (flows.py): "=pkg.mod.f", "@pkg.mod.Cls:method", "^...", ".method"
    position: int  # positional index of the argument, -1 for a keyword
    keyword: str  # the keyword, "" for a positional argument
    in_sink: bool  # the call is itself an argument of a client sink (`send_json(payload(str(e)))`)
    caught: tuple[str, ...]  # the classes its exceptions were caught as ("" where unknown)
    site: RawSite  # the OE205 site it becomes


class Leak(NamedTuple):
    """Exception text in a client sink: OE205 unless every exception it is made of is a public error."""

    caught: tuple[str, ...]
    site: RawSite


class Returned(NamedTuple):
    """Exception text a function returns (or an error body holding it): OE205 when its return reaches a
    client (a route's response, a sink's argument, a response model's field)."""

    function: str  # qualified name of the function that returns it
    caught: tuple[str, ...]
    site: RawSite


class Unanswered(NamedTuple):
    """An `except ValueError` clause that answers through the tree's own code (OE201 when it answers 4xx)."""

    callees: tuple[str, ...]  # callee references of the calls and raises made without a status argument
    message_in: str  # the function whose returned message this clause makes ("" when it returns none)
    site: RawSite  # the OE201 site it becomes (message filled in by the project pass)


class Handled(NamedTuple):
    """A broad `except` that passes its exception to callees on every path: OE202 unless one fails with it."""

    handoffs: tuple[tuple[str, int, str], ...]  # (callee reference, position, keyword) of each hand-off
    site: RawSite


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
    # What the project pass follows across functions (interprocedural.py): each function's flows
    # (flows.py), each class's methods and field annotations, the classes and entry points that reach
    # clients by use, the protocol-error evidence, and the sites that depend on all of those.
    flows: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, list[str]] = field(default_factory=dict)
    fields: dict[str, list[str]] = field(default_factory=dict)
    models: list[str] = field(default_factory=list)  # references of classes that reach clients
    entries: list[str] = field(default_factory=list)  # references of registered exception handlers
    renders: list[list[Any]] = field(default_factory=list)  # [caught classes, consumer, position, keyword]
    defined: list[str] = field(default_factory=list)
    forwarded: list[Forwarded] = field(default_factory=list)
    leaks: list[Leak] = field(default_factory=list)
    returned: list[Returned] = field(default_factory=list)
    unanswered: list[Unanswered] = field(default_factory=list)
    handled: list[Handled] = field(default_factory=list)

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
            "flows": self.flows,
            "members": self.members,
            "fields": self.fields,
            "models": self.models,
            "entries": self.entries,
            "renders": self.renders,
            "defined": self.defined,
            "forwarded": [[*f[:4], list(f.caught), list(f.site)] for f in self.forwarded],
            "leaks": [[list(k.caught), list(k.site)] for k in self.leaks],
            "returned": [[r.function, list(r.caught), list(r.site)] for r in self.returned],
            "unanswered": [[list(u.callees), u.message_in, list(u.site)] for u in self.unanswered],
            "handled": [[[list(h) for h in d.handoffs], list(d.site)] for d in self.handled],
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
            flows=data["flows"],
            members=data["members"],
            fields=data["fields"],
            models=data["models"],
            entries=data["entries"],
            renders=data["renders"],
            defined=data["defined"],
            forwarded=[Forwarded(f[0], f[1], f[2], f[3], tuple(f[4]), RawSite(*f[5])) for f in data["forwarded"]],
            leaks=[Leak(tuple(k[0]), RawSite(*k[1])) for k in data["leaks"]],
            returned=[Returned(r[0], tuple(r[1]), RawSite(*r[2])) for r in data["returned"]],
            unanswered=[Unanswered(tuple(u[0]), u[1], RawSite(*u[2])) for u in data["unanswered"]],
            handled=[Handled(tuple((h[0], h[1], h[2]) for h in d[0]), RawSite(*d[1])) for d in data["handled"]],
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
