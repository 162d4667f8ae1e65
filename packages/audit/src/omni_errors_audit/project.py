"""The project-wide pass: classify every `raise` against the class graph of all audited files, decide
the sites that depend on other files by following the exception across the tree (interprocedural.py),
apply suppressions, and turn per-file records into reported sites with fingerprints.

It runs on every audit (cached or not): a class's family can change when another file changes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from omni_errors_audit import names as N
from omni_errors_audit.interprocedural import Tree
from omni_errors_audit.model import FileResult, RawRaise, RawSite, Site, SourceFile
from omni_errors_audit.source import digest


@dataclass(slots=True)
class Inventory:
    """The sites of one audit, with the counts that are not sites."""

    sites: list[Site] = field(default_factory=list)
    raised_classes: Counter[str] = field(default_factory=Counter)
    reraises: int = 0
    lines: int = 0
    unparsable: dict[str, str] = field(default_factory=dict)  # file path -> why

    def to_json(self) -> dict[str, Any]:
        return {
            "sites": self.sites,
            "raised_classes": dict(self.raised_classes),
            "reraises": self.reraises,
            "lines": self.lines,
            "unparsable": self.unparsable,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Inventory:
        return cls(
            sites=[Site(*row) for row in data["sites"]],
            raised_classes=Counter(data["raised_classes"]),
            reraises=data["reraises"],
            lines=data["lines"],
            unparsable=data["unparsable"],
        )


class ClassGraph:
    """Classes, functions and re-exports of the audited tree, for resolving what a `raise` raises."""

    def __init__(self, results: Iterable[FileResult]) -> None:
        self.classes: dict[str, list[str]] = {}
        self.aliases: dict[str, str] = {}
        self.functions: set[str] = set()
        for r in results:
            self.classes.update(r.classes)
            self.aliases.update(r.aliases)
            self.functions.update(r.functions)
        self._family: dict[str, str] = {}
        self._canonical: dict[str, str] = {}

    def canonical(self, name: str) -> str:
        """Follow re-exports: `pkg.Error` imported in `pkg/__init__.py` from `pkg.errors` is `pkg.errors.Error`."""
        found = self._canonical.get(name)
        if found is None:
            found = self._canonical[name] = self._follow(name)
        return found

    def _follow(self, name: str) -> str:
        for _ in range(16):  # re-export chains are short; a cycle must not hang the audit
            if name in self.aliases and self.aliases[name] != name:
                name = self.aliases[name]
                continue
            head, _, tail = name.rpartition(".")
            while head and head not in self.aliases:
                head, _, more = head.rpartition(".")
                tail = f"{more}.{tail}"
            if not head or self.aliases[head] == head:
                return name
            name = f"{self.aliases[head]}.{tail}"
        return name

    def family(self, name: str) -> str:
        """ "OE902" for omni-errors' types, "OE901" for vLLM's family, "" otherwise (subclasses included)."""
        name = self.canonical(name)
        if name in self._family:
            return self._family[name]
        self._family[name] = ""  # guards against cyclic bases
        if name in N.OMNI_FAMILY:
            found = "OE902"
        elif name in N.VLLM_FAMILY:
            found = "OE901"
        else:
            found = next((f for f in map(self.family, self.classes.get(name, ())) if f), "")
        self._family[name] = found
        return found

    def classify(self, raise_: RawRaise) -> tuple[str, str, str]:
        """(rule or "", message, canonical class) for one raise."""
        if not raise_.target:
            return "OE100", f"cannot know what is raised: {raise_.detail}", ""
        name = self.canonical(raise_.target)
        short = name.rpartition(".")[2]
        how = f" ({raise_.detail})" if raise_.detail else ""
        if name in N.RAW_RAISES:
            return N.RAW_RAISES[name], f"raw `raise {short}`{how}", name
        family = self.family(name)
        if family:
            return family, f"semantic `raise {short}` ({name}){how}", name
        if name in self.functions:
            return "OE100", f"cannot know what is raised: the result of `{short}()`, a function", ""
        return "", "", name


def build(files: list[tuple[SourceFile, FileResult]]) -> Inventory:
    """Every reported site of the audit, suppressions applied, in path and line order."""
    graph = ClassGraph(r for _, r in files)
    tree = Tree((r for _, r in files), graph.canonical, graph.classes, graph.functions)
    inventory = Inventory()
    for source, result in files:
        inventory.reraises += result.reraises
        inventory.lines += result.lines
        if result.error is not None:
            inventory.unparsable[source.path] = result.error
        raw = list(result.sites)
        seen = {(r.rule, r.line, r.column, r.digest) for r in raw}
        for site in tree.followed(result):
            key = (site.rule, site.line, site.column, site.digest)
            if key not in seen:  # one piece of text reaches a client once, however many ways
                seen.add(key)
                raw.append(site)
        for r in result.raises:
            rule, message, name = graph.classify(r)
            if name:
                inventory.raised_classes[name] += 1
            if rule:
                raw.append(RawSite(rule, r.line, r.column, r.end_line, r.scope, r.digest, r.excerpt, message))
        inventory.sites.extend(_sites(source, result, raw))
    inventory.sites.sort(key=lambda s: (s.path, s.line, s.column, s.rule))
    return inventory


def _sites(source: SourceFile, result: FileResult, raw: list[RawSite]) -> list[Site]:
    by_line: dict[int, list[int]] = {}
    for i, sup in enumerate(result.suppressions):
        by_line.setdefault(sup.line, []).append(i)
    used: set[tuple[int, str]] = set()  # (suppression, code)
    out: list[Site] = []
    for r in sorted(raw):
        reason = None
        if r.rule not in ("OE000", "OE001"):
            for line in {r.line, r.end_line}:
                for i in by_line.get(line, ()):
                    if r.rule in result.suppressions[i].codes:
                        reason = result.suppressions[i].reason
                        used.add((i, r.rule))
        out.append(_site(source, r, reason))
    for i, sup in enumerate(result.suppressions):
        # Every code that suppresses nothing is reported: `ignore[OE201,OE205]` on a raise line where the
        # OE201 site is the `except` line above would otherwise hide that only OE205 is suppressed.
        unused = [code for code in sup.codes if (i, code) not in used]
        if unused:
            partly = "" if len(unused) == len(sup.codes) else " (its other codes do)"
            message = f"suppression of {', '.join(unused)} matches no site on this line{partly}"
            key = digest(source.key_path, "<module>", f"{unused}{sup.codes}{sup.reason}")
            out.append(_site(source, RawSite("OE002", sup.line, 1, sup.line, "<module>", key, "", message), None))
    return out


def _site(source: SourceFile, r: RawSite, suppressed: str | None) -> Site:
    return Site(
        rule=r.rule,
        path=source.display,
        key_path=source.key_path,
        area=source.area,
        line=r.line,
        column=r.column,
        end_line=r.end_line,
        scope=r.scope,
        excerpt=r.excerpt,
        message=r.message,
        fingerprint=f"{r.rule}:{r.digest}",
        suppressed=suppressed,
    )
