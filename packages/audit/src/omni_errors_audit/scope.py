"""Name binding and resolution for one file: what a name or `a.b.c` chain refers to at a given point.

Scopes follow Python's rules (function scopes see enclosing functions and the module, never class
bodies). Module-level bindings are collected before the walk (a function may use a name bound below
it); function-level bindings accumulate in source order, so a name resolves from its bindings that come
before the use.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import NamedTuple

from omni_errors_audit.names import BUILTIN_NAMES


class Binding(NamedTuple):
    """What one assignment, import, definition or parameter binds a name to."""

    kind: str  # import | class | function | call | except | param | value
    target: str = ""  # qualified name (import, class, function)
    last: str = ""  # the callee's last name segment (call)
    callee: ast.expr | None = None  # the callee (call), resolved where the binding is used


VALUE = Binding("value")
EXCEPT = Binding("except")


class Origin(NamedTuple):
    """A piece of exception text that a local object now carries: where to report it, and from what."""

    node: ast.expr
    anchor: ast.AST | None  # the statement that built it (part of the site's fingerprint)
    caught: tuple[str, ...]


@dataclass(slots=True)
class HandlerFrame:
    """An `except` clause being walked."""

    node: ast.ExceptHandler
    value_error: bool
    broad: bool
    raised: bool = False
    answer: str = ""  # how it answers 4xx, when it does ("HTTPException(400)")
    callees: list[str] = field(default_factory=list)  # references of calls without a status, and raises
    message: bool = False  # it returns a message (a string, or exception text): what its function answers


@dataclass(slots=True)
class Scope:
    """A module, class or function scope."""

    kind: str  # module | class | function
    qualname: str  # dotted, below the module ("Cls.method"); "" for the module
    bindings: dict[str, list[Binding]] = field(default_factory=dict)
    parent: Scope | None = None
    handlers: list[HandlerFrame] = field(default_factory=list)
    tainted: dict[str, tuple[str, ...]] = field(default_factory=dict)  # locals holding exception text -> caught as
    route: bool = False
    deadline: int = 0  # depth of enclosing `with asyncio.timeout(...)`
    methods: dict[str, str] = field(default_factory=dict)  # class scope: method name -> qualified name
    lines: tuple[int, int] = (0, 0)  # function scope: its first and last line
    params: dict[str, int] = field(default_factory=dict)  # function scope: parameter -> position (-1: keyword)
    owner: str = ""  # the qualified class whose method this is (or encloses it): what `self.m()` calls
    # Flows (flows.py): locals that carry a parameter's value, locals bound to a call's result (the calls),
    # and locals holding an object built from exception text (origins, see `Origin`).
    aliases: dict[str, str] = field(default_factory=dict)
    results: dict[str, list[tuple[str, ast.Call]]] = field(default_factory=dict)
    carriers: dict[str, list[Origin]] = field(default_factory=dict)

    def bind(self, name: str, binding: Binding) -> None:
        found = self.bindings.get(name)
        if found is None:
            self.bindings[name] = [binding]
        else:
            found.append(binding)


def lookup(scope: Scope, name: str) -> list[Binding] | None:
    """The bindings of `name` visible from `scope`, innermost first; None when it is unbound."""
    current: Scope | None = scope
    first = True
    while current is not None:
        if current.kind != "class" or first:
            found = current.bindings.get(name)
            if found:
                return found
        first = False
        current = current.parent
    return None


def resolve(scope: Scope, node: ast.expr) -> str | None:
    """The qualified name a Name or Attribute chain refers to, when it refers to a definition or import.

    `VE` after `from builtins import ValueError as VE` is `builtins.ValueError`; `ve.VLLMNotFoundError`
    after `import vllm.exceptions as ve` is `vllm.exceptions.VLLMNotFoundError`. Local variables,
    parameters and attributes of objects resolve to None.
    """
    attrs: list[str] = []
    while type(node) is ast.Attribute:
        attrs.append(node.attr)
        node = node.value
    if type(node) is not ast.Name:
        return None
    base = name_target(scope, node.id)
    if base is None:
        return None
    if attrs:
        attrs.reverse()
        return base + "." + ".".join(attrs)
    return base


def name_target(scope: Scope, name: str) -> str | None:
    """What a bare name refers to: an import, a class or function definition, or a builtin."""
    bindings = lookup(scope, name)
    if bindings is None:
        return "builtins." + name if name in BUILTIN_NAMES else None
    # `try: from x import A / except ImportError: A = None`: the first definition is what the code means.
    for b in bindings:
        if b.kind in ("import", "class", "function"):
            return b.target
    return None


def last_name(node: ast.expr) -> str:
    """The last segment of a callee: `HTTPException` for `fastapi.HTTPException`, `get` for `q.get`."""
    if type(node) is ast.Attribute:
        return node.attr
    if type(node) is ast.Name:
        return node.id
    return ""


def call_binding(value: ast.expr | None) -> Binding:
    """The binding an assignment of `value` makes: a call records its callee, anything else is a value."""
    if type(value) is ast.Call:
        func = value.func
        return Binding("call", "", last_name(func), func)
    return VALUE


def callee_target(scope: Scope, binding: Binding) -> str:
    """The qualified name of a call binding's callee, "" when it cannot be known."""
    return (resolve(scope, binding.callee) if binding.callee is not None else None) or ""


def import_bindings(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[tuple[str, str]]:
    """(bound name, qualified target) for each alias of an import statement, relative imports resolved."""
    out: list[tuple[str, str]] = []
    if type(node) is ast.Import:
        for alias in node.names:
            if alias.asname:
                out.append((alias.asname, alias.name))
            else:
                head = alias.name.partition(".")[0]
                out.append((head, head))
        return out
    assert type(node) is ast.ImportFrom
    base = node.module or ""
    if node.level:
        parts = module.split(".")
        keep = len(parts) - node.level + (1 if is_package else 0)
        prefix = ".".join(parts[: max(keep, 0)])
        base = f"{prefix}.{base}" if prefix and base else (prefix or base)
    for alias in node.names:
        if alias.name == "*":
            continue
        out.append((alias.asname or alias.name, f"{base}.{alias.name}" if base else alias.name))
    return out
