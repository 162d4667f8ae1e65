"""Name bindings of the walk: module-level names bound first, then what assignments, loops, `with`
and `try` bind in each scope, limited to the names some check asks about."""

from __future__ import annotations

import ast

from omni_errors_audit import names as N
from omni_errors_audit.checks import ExpressionChecks
from omni_errors_audit.predicates import is_error_maker, target_names
from omni_errors_audit.scope import EXCEPT, VALUE, Binding, call_binding, import_bindings, last_name
from omni_errors_audit.sockets import SocketFacts
from omni_errors_audit.source import SourceText

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
TRY_STAR: type = getattr(ast, "TryStar", ast.Try)  # Python 3.11+
_UNPACKING = frozenset({ast.Tuple, ast.List, ast.Starred})  # targets other than a Name that bind names


class BindingVisitor(ExpressionChecks):
    """The bindings of one module's scopes, and the re-exported class aliases."""

    def __init__(
        self,
        module: str,
        is_package: bool,
        source: SourceText,
        hot_lines: list[int],
        imports_zmq: bool,
        tracked: set[str],
        sockets: SocketFacts,
    ) -> None:
        super().__init__(module, source, hot_lines, imports_zmq, sockets)
        self.is_package = is_package
        self.tracked = tracked  # names the file raises by name: `raise err`
        self.aliases: dict[str, str] = {}

    def prebind(self, body: list[ast.stmt]) -> None:
        """Bind every module-level name first: functions may use names bound below them."""
        scope = self.scope
        for s in body:
            if isinstance(s, (ast.Import, ast.ImportFrom)):
                for name, target in import_bindings(s, self.module, self.is_package):
                    scope.bind(name, Binding("import", target))
                    if name[:1].isupper():  # re-exports of classes, for project.py's canonical names
                        self.aliases[f"{self.module}.{name}"] = target
            elif isinstance(s, ast.ClassDef):
                scope.bind(s.name, Binding("class", f"{self.module}.{s.name}"))
            elif isinstance(s, FUNCTIONS):
                scope.bind(s.name, Binding("function", f"{self.module}.{s.name}"))
            else:
                self.bind_targets(s)
                for child in _bodies(s):
                    self.prebind(child)

    def bind_targets(self, s: ast.stmt) -> None:
        """Bind what an assignment, loop, `with` or `try` binds in the current scope.

        Only names the file raises by name are tracked, plus names bound to a `ContextVar(...)` or to
        an error response (what the wait and error-body checks ask about): other bindings change no
        rule's answer, and skipping them keeps the walk cheap.
        """
        tracked = self.tracked
        if isinstance(s, ast.Assign):
            value = s.value
            by_value = self.binds_by_value(value)
            for target in s.targets:
                if isinstance(target, ast.Name):
                    if by_value or target.id in tracked:
                        self.scope.bind(target.id, call_binding(value))
                elif by_value:  # `reader, writer = multiprocessing.Pipe()`
                    for name in target_names(target):
                        self.scope.bind(name, call_binding(value))
                elif type(target) in _UNPACKING:  # `self.x = ...` and `d[k] = ...` bind no name
                    self.bind_names(target)
        elif isinstance(s, (ast.AnnAssign, ast.AugAssign)):
            target = s.target
            annotated = s.value if isinstance(s, ast.AnnAssign) else None
            # `X: ContextVar[T] = ContextVar(...)` binds like the unannotated form.
            if isinstance(target, ast.Name) and (target.id in tracked or self.binds_by_value(annotated)):
                self.scope.bind(target.id, call_binding(annotated))
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            self.bind_names(s.target)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                if item.optional_vars is not None:
                    self.bind_names(item.optional_vars)
        elif type(s) is ast.Try or type(s) is TRY_STAR:
            for handler in getattr(s, "handlers", ()):  # Try and TryStar (3.11+) alike
                if handler.name in tracked:
                    self.scope.bind(handler.name, EXCEPT)

    def binds_by_value(self, value: ast.expr | None) -> bool:
        """Calls whose result the checks ask about: ContextVars, error responses, pipes, timed sockets."""
        if type(value) is not ast.Call:
            return False
        last = last_name(value.func)
        return last in N.BOUND_CALLS or is_error_maker(last) or last in self.sockets.makers

    def bind_names(self, target: ast.expr) -> None:
        tracked = self.tracked
        for name in target_names(target):
            if name in tracked:
                self.scope.bind(name, VALUE)


def _bodies(s: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested in a compound statement (not function or class bodies)."""
    out = [getattr(s, f) for f in ("body", "orelse", "finalbody") if getattr(s, f, None)]
    out.extend(h.body for h in getattr(s, "handlers", ()))
    out.extend(c.body for c in getattr(s, "cases", ()))
    return out
