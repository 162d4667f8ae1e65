"""OE202's flow rule: what a broad `except` clause does with its exception on every path through it.

A clause *handles* its exception (it is not swallowed) when every path through its body stores the
exception where a `raise` of the same function raises it or chains from it (`error = exc` ... `raise
error`; `errors.append(f"{name}: {exc}")` ... `raise ...(errors)`; an attribute or module name raised
anywhere in the module), or hands the exception object to a function that raises it, chains from it or
sets it on a future (decided project-wide, interprocedural.py). A path is a sequence of statements up to
a `return`, `break`, `continue` or `raise`; an `if` counts what both branches do, a `with` its body, a
`try` its `finally`; loops may not run, so what they do does not count.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass, field

from omni_errors_audit.predicates import descendants

_APPENDS = frozenset({"append", "add", "extend", "appendleft", "insert"})
Ref = Callable[[ast.expr], str]  # the callee reference of a call's function (flows.py)


@dataclass(slots=True)
class Actions:
    """What one path through a clause does with its exception."""

    stores: set[str] = field(default_factory=set)  # "x", "self.x": where the exception (or its text) is kept
    handoffs: dict[tuple[str, int, str], None] = field(default_factory=dict)  # (callee, position, keyword)


def on_every_path(body: list[ast.stmt], name: str, ref: Ref) -> Actions:
    """The stores and hand-offs of exception `name` that every path through `body` performs."""
    done = Actions()
    for s in body:
        t = type(s)
        if t is ast.Expr or t is ast.Return:
            value = s.value  # type: ignore[attr-defined]
            if type(value) is ast.Await:
                value = value.value
            if type(value) is ast.Call:
                _call(value, name, ref, done)
            if t is ast.Return:
                break
        elif t is ast.Assign or t is ast.AnnAssign:
            value = s.value  # type: ignore[attr-defined]
            if value is not None and _holds(value, name):
                targets = s.targets if t is ast.Assign else [s.target]  # type: ignore[attr-defined]
                done.stores.update(k for k in map(store_key, targets) if k)
        elif t is ast.If:
            yes = on_every_path(s.body, name, ref)  # type: ignore[attr-defined]
            no = on_every_path(s.orelse, name, ref)  # type: ignore[attr-defined]
            done.stores |= yes.stores & no.stores
            done.handoffs.update((h, None) for h in yes.handoffs if h in no.handoffs)
        elif t is ast.With or t is ast.AsyncWith:
            inner = on_every_path(s.body, name, ref)  # type: ignore[attr-defined]
            done.stores |= inner.stores
            done.handoffs.update(inner.handoffs)
        elif t is ast.Try:
            inner = on_every_path(s.finalbody, name, ref)  # type: ignore[attr-defined]
            done.stores |= inner.stores
            done.handoffs.update(inner.handoffs)
        elif t is ast.Break or t is ast.Continue or t is ast.Raise:
            break
    return done


def _call(call: ast.Call, name: str, ref: Ref, done: Actions) -> None:
    func = call.func
    args = [(i, "", a) for i, a in enumerate(call.args)]
    args.extend((-1, kw.arg, kw.value) for kw in call.keywords if kw.arg)
    if type(func) is ast.Attribute and func.attr in _APPENDS and any(_holds(a, name) for _, _, a in args):
        key = store_key(func.value)
        if key:
            done.stores.add(key)
        return
    callee = ref(func)
    if not callee:
        return
    for position, keyword, arg in args:
        if type(arg) is ast.Name and arg.id == name:
            done.handoffs[(callee, position, keyword)] = None


def _holds(node: ast.expr, name: str) -> bool:
    """The exception itself or its text: `exc`, `first or exc`, `f"{path}: {exc}"`, `(key, exc)`."""
    return any(type(n) is ast.Name and n.id == name for n in descendants(node))


def store_key(target: ast.expr) -> str:
    """`error`, `self._error`, `results` (of `results[i]`): what a later `raise` names."""
    if type(target) is ast.Subscript:
        target = target.value
    if type(target) is ast.Name:
        return target.id
    if type(target) is ast.Attribute and type(target.value) is ast.Name:
        return f"{target.value.id}.{target.attr}"
    return ""


def raise_mentions(s: ast.Raise) -> frozenset[str]:
    """The names and `obj.attr` chains a `raise` statement's exception and cause mention."""
    found: set[str] = set()
    for part in (s.exc, s.cause):
        if part is None:
            continue
        for n in descendants(part):
            if type(n) is ast.Name:
                found.add(n.id)
            elif type(n) is ast.Attribute and type(n.value) is ast.Name:
                found.add(f"{n.value.id}.{n.attr}")
    return frozenset(found)


def stored_and_raised(function: str, stores: set[str], raises: list[tuple[str, frozenset[str]]]) -> bool:
    """Whether a `raise` raises what a clause of `function` stored: a local in that function (or one
    enclosing or nested in it), an attribute or a module-level name anywhere in the module."""
    for key in stores:
        everywhere = "." in key or function == "<module>"
        for where, names in raises:
            if key in names and (
                everywhere or where == function or where.startswith(f"{function}.") or function.startswith(f"{where}.")
            ):
                return True
    return False
