"""The statement walk of one file: scopes and bindings, `raise` statements, `except` clauses, routes and
signal handlers. Expressions go to the checks in checks.py.

Each statement kind has one handler; compound statements recurse into their bodies. A `raise` is
resolved to the class it raises (through aliases and local bindings) and classified project-wide later
(project.py), because whether `Foo` derives from `VLLMError` may be decided in another file.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any

from omni_errors.audit import names as N
from omni_errors.audit.checks import ExpressionChecks, is_error_maker, lines_between
from omni_errors.audit.model import RawRaise, RawSite, Unanswered
from omni_errors.audit.scope import (
    EXCEPT,
    VALUE,
    Binding,
    HandlerFrame,
    Scope,
    call_binding,
    callee_target,
    import_bindings,
    last_name,
    lookup,
    resolve,
)
from omni_errors.audit.sockets import SocketFacts
from omni_errors.audit.source import SourceText, shape

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_ASSIGNMENTS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign})
_TRY_STAR: type = getattr(ast, "TryStar", ast.Try)  # Python 3.11+


class FileVisitor(ExpressionChecks):
    """Walks one parsed module and collects its sites, raises, classes and aliases."""

    def __init__(
        self,
        module: str,
        is_package: bool,
        source: SourceText,
        hot_lines: list[int],
        relevant_lines: list[int],
        imports_zmq: bool,
        tracked: set[str],
        sockets: SocketFacts,
    ) -> None:
        super().__init__(module, source, hot_lines, imports_zmq, sockets)
        self.is_package = is_package
        self.relevant_lines = relevant_lines
        self.tracked = tracked  # names the file raises by name: `raise err`
        self.raises: list[RawRaise] = []
        self.classes: dict[str, list[str]] = {}
        self.aliases: dict[str, str] = {}
        self.functions: list[str] = []
        self.status_defaults: dict[str, int] = {}
        self.unanswered: list[Unanswered] = []
        self.reraises = 0
        # One handler per compound statement kind; each takes the statement of its own type.
        self.dispatch: dict[type, Callable[[Any], None]] = {
            ast.Raise: self.raise_,
            ast.Try: self.try_,
            _TRY_STAR: self.try_,
            ast.FunctionDef: self.function,
            ast.AsyncFunctionDef: self.function,
            ast.ClassDef: self.class_,
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

    def run(self, tree: ast.Module) -> None:
        self.prebind(tree.body)
        self.body(tree.body)
        self.finish_signal_handlers()

    # -- bindings --------------------------------------------------------------------------------
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
            elif isinstance(s, _FUNCTIONS):
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
                    for name in _names(target):
                        self.scope.bind(name, call_binding(value))
                else:
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
        elif type(s) is ast.Try or type(s) is _TRY_STAR:
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
        for name in _names(target):
            if name in tracked:
                self.scope.bind(name, VALUE)

    # -- statements ------------------------------------------------------------------------------
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
        if type(s) in _ASSIGNMENTS and scope.kind != "module":
            self.bind_targets(s)
        deep = scope.handlers or self.exc_names or scope.tainted
        if deep and isinstance(s, ast.Assign) and self.exc_text(s.value):
            for target in s.targets:
                scope.tainted.update(_names(target))
        if scope.route and isinstance(s, ast.Return) and s.value is not None and self.is_error_body(s.value):
            self.add("OE204", s, "route returns an error body without a status (FastAPI sends 200)")
        if deep or lines_between(self.hot_lines, s.lineno, s.end_lineno or s.lineno):
            self.walk(s)

    def import_(self, s: ast.Import | ast.ImportFrom) -> None:
        if self.scope.kind != "module":
            for name, target in import_bindings(s, self.module, self.is_package):
                self.scope.bind(name, Binding("import", target))

    def if_(self, s: ast.If | ast.While) -> None:
        self.expr(s.test)
        self.body(s.body)
        self.body(s.orelse)

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

    # -- raise -----------------------------------------------------------------------------------
    def raise_(self, s: ast.Raise) -> None:
        for frame in self.scope.handlers:
            frame.raised = True
        self.anchor = s
        if self.is_deep() or self.is_hot(s):
            self.walk(s)
        exc = s.exc
        if exc is None:
            self.reraises += 1
            return
        target, detail = self.raised_class(exc)
        if target is None:
            self.reraises += 1
            return
        handlers = self.scope.handlers
        if handlers and handlers[-1].value_error and not handlers[-1].answer:
            short = target.rpartition(".")[2]
            if short in N.PUBLIC_ERRORS:  # a client error: 4xx by definition
                handlers[-1].answer = f"`raise {short}` (a 4xx client error)"
        if target == "builtins.SystemExit":
            candidate = self.site("OE302", s, "`raise SystemExit` inside a signal handler")
            self.signals.exit_in(self.function_key(), candidate)
        site = self.site("OE100", s, "")
        self.raises.append(
            RawRaise(site.line, site.column, site.end_line, site.scope, site.digest, site.excerpt, target, detail)
        )

    def raised_class(self, exc: ast.expr) -> tuple[str | None, str]:
        """(qualified class name, how it was found); ("", why) when unknown, (None, "") for a re-raise."""
        scope = self.scope
        if type(exc) is ast.Call:
            func = exc.func
            if type(func) is ast.Attribute and func.attr == "with_traceback" and self.is_caught(func.value):
                return None, ""
            target = resolve(scope, func)
            return (target, "") if target else ("", "the raised value is built by an expression")
        if type(exc) is ast.Name:
            bindings = lookup(scope, exc.id)
            if bindings and all(b.kind == "except" for b in bindings):
                return None, ""
            if bindings and all(b.kind == "call" for b in bindings):
                callees = {callee_target(scope, b) for b in bindings}
                if len(callees) == 1 and "" not in callees:
                    callee = callees.pop()
                    return callee, f"`{exc.id}` is bound to `{callee.rpartition('.')[2]}(...)`"
                return "", f"`{exc.id}` is bound to different or unknown values"
            target = resolve(scope, exc)
            return (target, "") if target else ("", f"`{exc.id}` is a variable")
        if type(exc) is ast.Attribute:
            target = resolve(scope, exc)
            return (target, "") if target else ("", "the raised value is an attribute of an object")
        return "", "the raised value is an expression"

    def is_caught(self, node: ast.expr) -> bool:
        if type(node) is not ast.Name:
            return False
        bindings = lookup(self.scope, node.id)
        return bool(bindings) and all(b.kind == "except" for b in bindings or ())

    # -- try / except ----------------------------------------------------------------------------
    def try_(self, s: ast.Try) -> None:
        if self.scope.kind != "module":
            self.bind_targets(s)
        self.body(s.body)
        for handler in s.handlers:
            self.handler(handler)
        self.body(s.orelse)
        self.body(s.finalbody)

    def handler(self, h: ast.ExceptHandler) -> None:
        types = [] if h.type is None else (h.type.elts if type(h.type) is ast.Tuple else [h.type])
        caught = {resolve(self.scope, t) for t in types}
        frame = HandlerFrame(
            h, value_error="builtins.ValueError" in caught, broad=not types or bool(caught & N.BROAD_EXCEPTIONS)
        )
        self.scope.handlers.append(frame)
        name = h.name
        added = name is not None and name not in self.exc_names
        public = bool(caught) and all(c is not None and c.rpartition(".")[2] in N.PUBLIC_ERRORS for c in caught)
        if name is not None and added:
            self.exc_names.add(name)
            if public:
                self.public_names.add(name)
        try:
            self.body(h.body)
        finally:
            self.scope.handlers.pop()
            if name is not None and added:
                self.exc_names.discard(name)
                self.public_names.discard(name)
        header_end = h.type.end_lineno if h.type is not None else h.lineno
        header = f"except {shape(h.type) if h.type is not None else ''} as {name or ''}"
        self.anchor = None
        if frame.value_error and frame.answer:
            self.add("OE201", h, f"`except ValueError` answers {frame.answer}", header_end, header)
        elif frame.value_error and frame.callees:  # 4xx if one of them defaults to it: see project.py
            site = self.site("OE201", h, "", header_end, header)
            self.unanswered.append(Unanswered(tuple(dict.fromkeys(frame.callees)), site))
        if frame.broad and not frame.raised:
            kind = "bare `except:`" if not types else "`except Exception`"
            self.add("OE202", h, f"{kind} without a raise swallows the error", header_end, header)

    # -- definitions -----------------------------------------------------------------------------
    def function(self, s: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        parent = self.scope
        qualname = f"{parent.qualname}.{s.name}" if parent.qualname else s.name
        full = f"{self.module}.{qualname}"
        if parent.kind == "module":  # importable by name, so `raise make_error()` elsewhere resolves here
            self.functions.append(full)
        if parent.kind == "class":
            parent.methods[s.name] = full
        if parent.kind != "module":
            parent.bind(s.name, Binding("function", full))
        for deco in s.decorator_list:
            self.expr(deco)
        route = any(N.is_route_decorator(d) for d in s.decorator_list)
        args = s.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        positions = self.parameters(s, parent)
        if args.vararg is not None:
            params.append(args.vararg)
        if args.kwarg is not None:
            params.append(args.kwarg)
        signature_end = s.body[0].lineno - 1 if s.body else s.lineno
        exc_names = (
            {a.arg for a in params if a.annotation is not None and N.is_exception_annotation(a.annotation)}
            if lines_between(self.relevant_lines, s.lineno, max(signature_end, s.lineno))
            else set()
        )
        if not (route or exc_names or lines_between(self.relevant_lines, s.lineno, s.end_lineno or s.lineno)):
            return  # nothing in the body can yield a site (see scan.py)
        scope = Scope(
            "function",
            qualname,
            parent=parent,
            route=route,
            lines=(s.lineno, s.end_lineno or s.lineno),
            params=positions,
        )
        tracked = self.tracked
        for a in params:
            if a.arg in tracked:
                scope.bind(a.arg, Binding("param"))
        saved = self.exc_names
        self.exc_names = exc_names
        self.scope = scope
        try:
            self.body(s.body)
        finally:
            self.scope = parent
            self.exc_names = saved

    def parameters(self, s: ast.FunctionDef | ast.AsyncFunctionDef, parent: Scope) -> dict[str, int]:
        """Parameter -> position as callers pass it (`self`/`cls` of a method not counted; keyword-only: -1);
        records a status parameter that defaults to a 4xx (`status_code=HTTPStatus.BAD_REQUEST`)."""
        args = s.args
        positional = [*args.posonlyargs, *args.args]
        if parent.kind == "class" and positional and positional[0].arg in ("self", "cls"):
            positional = positional[1:]
        positions = {a.arg: i for i, a in enumerate(positional)}
        positions.update((a.arg, -1) for a in args.kwonlyargs)
        defaults = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=False))
        defaults.extend((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None)
        for param, default in defaults:
            if param.arg in N.STATUS_KEYWORDS:
                saved, self.scope = self.scope, parent
                try:
                    status = self.status(default)
                finally:
                    self.scope = saved
                if status is not None and 400 <= status < 500:
                    self.status_defaults[s.name] = status
        return positions

    def class_(self, s: ast.ClassDef) -> None:
        parent = self.scope
        qualname = f"{parent.qualname}.{s.name}" if parent.qualname else s.name
        full = f"{self.module}.{qualname}"
        self.classes[full] = [b for b in (resolve(parent, base) for base in s.bases) if b]
        if parent.kind != "module":
            parent.bind(s.name, Binding("class", full))
        for deco in s.decorator_list:
            self.expr(deco)
        scope = Scope("class", qualname, parent=parent)
        self.scope = scope
        try:
            self.body(s.body)
        finally:
            self.scope = parent

    # -- signal handlers (OE302) -----------------------------------------------------------------
    def finish_signal_handlers(self) -> None:
        self.anchor = None
        self.sites.extend(self.signals.sites(self.site_in))

    def site_in(self, scope: Scope, node: ast.expr, message: str) -> RawSite:
        saved, self.scope = self.scope, scope
        try:
            return self.site("OE302", node, message)
        finally:
            self.scope = saved


def _nothing(_: ast.stmt) -> None:
    return None


def _bodies(s: ast.stmt) -> list[list[ast.stmt]]:
    """The statement lists nested in a compound statement (not function or class bodies)."""
    out = [getattr(s, f) for f in ("body", "orelse", "finalbody") if getattr(s, f, None)]
    out.extend(h.body for h in getattr(s, "handlers", ()))
    out.extend(c.body for c in getattr(s, "cases", ()))
    return out


def _names(target: ast.expr) -> list[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in _names(elt)]
    if isinstance(target, ast.Starred):
        return _names(target.value)
    return []
