"""The statement walk: the dispatch of statements to their handlers, simple statements and the
control-flow ones (`if`, `while`, `for`, `with`, `match`, imports) that recurse into their bodies."""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Callable
from typing import Any

from omni_errors_audit import names as N
from omni_errors_audit.bindings import BindingVisitor
from omni_errors_audit.predicates import is_message, target_names
from omni_errors_audit.scope import Binding, import_bindings, last_name, resolve

_ASSIGNMENTS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign})


class StatementVisitor(BindingVisitor):
    """Walks statement lists; `FileVisitor` (visitor.py) adds raises, `try`, functions and classes."""

    #: Statement type -> its handler, each taking a statement of its own type (set by `FileVisitor`
    #: from `statement_handlers()` and its own); a type not in it is a simple statement.
    dispatch: dict[type, Callable[[Any], None]]

    def statement_handlers(self) -> dict[type, Callable[[Any], None]]:
        """The handlers of the control-flow statements walked here."""
        return {
            ast.If: self.if_,
            ast.While: self.if_,
            ast.For: self.for_,
            ast.AsyncFor: self.for_,
            ast.With: self.with_,
            ast.AsyncWith: self.with_,
            ast.Match: self.match,
            ast.Import: self.import_,
            ast.ImportFrom: self.import_,
            ast.Pass: _nothing,
            ast.Break: _nothing,
            ast.Continue: _nothing,
        }

    def body(self, stmts: list[ast.stmt]) -> None:
        dispatch = self.dispatch
        for s in stmts:
            handler = dispatch.get(type(s))
            if handler is not None:
                handler(s)
            else:
                self.simple(s)

    def simple(self, s: ast.stmt) -> None:
        """Expression statements, assignments, returns, deletes, asserts."""
        scope = self.scope
        self.anchor = s
        t = type(s)
        if t in _ASSIGNMENTS and scope.kind != "module":
            self.bind_targets(s)
        if scope.kind != "class":
            self.flow_statement(s)
        deep = scope.handlers or self.exc_names or scope.tainted or scope.carriers
        if deep:
            value = s.value if t is ast.Assign or t is ast.AnnAssign else None  # type: ignore[attr-defined]
            if value is not None:
                targets = s.targets if t is ast.Assign else [s.target]  # type: ignore[attr-defined]
                names = [n for target in targets for n in target_names(target)]
                if self.exc_text(value):  # `msg = str(e)`: the local is exception text
                    caught = self.caught(value)
                    for name in names:
                        scope.tainted[name] = caught
                        scope.carriers.pop(name, None)
                else:  # `error = {"message": str(e)}`: the local carries it
                    for name in names:
                        scope.tainted.pop(name, None)
                    self.carry(names, value)
            if t is ast.Return and s.value is not None:  # type: ignore[attr-defined]
                self.returned_text(s.value)  # type: ignore[attr-defined]
                handlers = scope.handlers
                if handlers and handlers[-1].value_error and is_message(s.value, self.exc_text):  # type: ignore[attr-defined]
                    handlers[-1].message = True
        if scope.route and t is ast.Return and s.value is not None and self.is_error_body(s.value):  # type: ignore[attr-defined]
            self.add("OE204", s, "route returns an error body without a status (FastAPI sends 200)")
        if deep:
            self.walk(s)
            return
        hot = self.hot_lines  # lines_between, inlined: this runs for every simple statement
        i = bisect_left(hot, s.lineno)
        if i < len(hot) and hot[i] <= (s.end_lineno or s.lineno):
            self.walk(s)

    def import_(self, s: ast.Import | ast.ImportFrom) -> None:
        if self.scope.kind != "module":
            for name, target in import_bindings(s, self.module, self.is_package):
                self.scope.bind(name, Binding("import", target))

    def if_(self, s: ast.If | ast.While) -> None:
        self.expr(s.test)
        self.tests.append(s.test)
        narrowed = self.narrowing(s.test)
        try:
            if narrowed is None:
                self.body(s.body)
            else:  # `if isinstance(exc, HTTPException):` the body knows what `exc` is
                name, classes = narrowed
                saved = self.exc_names[name]
                self.exc_names[name] = classes
                try:
                    self.body(s.body)
                finally:
                    self.exc_names[name] = saved
            self.body(s.orelse)
        finally:
            self.tests.pop()

    def narrowing(self, test: ast.expr) -> tuple[str, tuple[str, ...]] | None:
        """`isinstance(exc, A)` or `isinstance(exc, (A, B))` of an exception in scope: (name, classes)."""
        if not (
            type(test) is ast.Call
            and type(test.func) is ast.Name
            and test.func.id == "isinstance"
            and len(test.args) == 2
            and type(test.args[0]) is ast.Name
            and test.args[0].id in self.exc_names
        ):
            return None
        kinds = test.args[1].elts if type(test.args[1]) is ast.Tuple else [test.args[1]]
        classes = tuple(sorted(t for t in (resolve(self.scope, k) for k in kinds) if t))
        return (test.args[0].id, classes) if classes else None

    def for_(self, s: ast.For | ast.AsyncFor) -> None:
        if self.scope.kind != "module":
            self.bind_targets(s)
        self.expr(s.iter)
        self.body(s.body)
        self.body(s.orelse)

    def with_(self, s: ast.With | ast.AsyncWith) -> None:
        if self.scope.kind != "module":
            self.bind_targets(s)
        deadline = 0
        for item in s.items:
            self.expr(item.context_expr)
            ctx = item.context_expr
            if type(ctx) is ast.Call and last_name(ctx.func) in N.DEADLINE_CONTEXTS:
                deadline = 1
        self.scope.deadline += deadline
        self.body(s.body)
        self.scope.deadline -= deadline

    def match(self, s: ast.Match) -> None:
        self.expr(s.subject)
        for case in s.cases:
            if case.guard is not None:
                self.expr(case.guard)
            self.body(case.body)

    def expr(self, node: ast.expr) -> None:
        if self.is_deep() or self.is_hot(node):
            self.anchor = node
            self.walk(node)


def _nothing(_: ast.stmt) -> None:
    return None
