"""OE302 bookkeeping for one module: where each function raises SystemExit, which functions the module
registers as signal handlers, and so which of those exits happen inside a handler.

Exits are recorded as the walk meets them and handlers as their registration is met; the two are
joined at the end of the module, since a handler is usually defined before it is registered.
"""

from __future__ import annotations

import ast
from collections.abc import Callable

from omni_errors_audit import names as N
from omni_errors_audit.model import RawSite
from omni_errors_audit.scope import Scope, last_name, resolve

SiteMaker = Callable[[Scope, ast.expr, str], RawSite]  # (scope, node, message) -> an OE302 site


class SignalHandlers:
    """The SystemExit sites of one module's functions and its `signal.signal` registrations."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.exits: dict[str, list[RawSite]] = {}  # qualified function -> its SystemExit raises/calls
        self.registered: list[tuple[Scope, ast.expr]] = []  # (scope of the call, handler expression)

    def exit_in(self, function: str, site: RawSite) -> None:
        self.exits.setdefault(function, []).append(site)

    def register(self, scope: Scope, handler: ast.expr) -> None:
        self.registered.append((scope, handler))

    def sites(self, make_site: SiteMaker) -> list[RawSite]:
        """The recorded exits of every registered handler, each function once."""
        out: list[RawSite] = []
        seen: set[str] = set()
        for scope, ref in self.registered:
            for key in self._functions(scope, ref, make_site):
                if key not in seen:
                    seen.add(key)
                    out.extend(self.exits.get(key, ()))
        return out

    def _functions(self, scope: Scope, ref: ast.expr, make_site: SiteMaker) -> list[str]:
        """The functions a handler expression names (qualified), unwrapping `functools.partial`."""
        if isinstance(ref, ast.Call) and last_name(ref.func) == "partial" and ref.args:
            return self._functions(scope, ref.args[0], make_site)
        if isinstance(ref, ast.Lambda):
            return [self._lambda(scope, ref, make_site)]
        if isinstance(ref, ast.Attribute) and isinstance(ref.value, ast.Name) and ref.value.id in ("self", "cls"):
            owner: Scope | None = scope
            while owner is not None and owner.kind != "class":
                owner = owner.parent
            return [owner.methods[ref.attr]] if owner is not None and ref.attr in owner.methods else []
        target = resolve(scope, ref)
        return [target] if target else []

    def _lambda(self, scope: Scope, node: ast.Lambda, make_site: SiteMaker) -> str:
        key = f"{self.module}.<lambda:{node.lineno}:{node.col_offset}>"  # unique; the scope name is not
        inner = Scope("function", f"{scope.qualname}.<lambda>" if scope.qualname else "<lambda>", parent=scope)
        for sub in ast.walk(node.body):
            if isinstance(sub, ast.Call) and resolve(inner, sub.func) in N.SYSTEM_EXIT_CALLS:
                self.exit_in(key, make_site(inner, sub, "lambda signal handler raises SystemExit"))
        return key
