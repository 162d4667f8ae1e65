"""The statement walk of one file, what it records: `raise` statements, `except` clauses, functions,
classes and signal handlers. Bindings are in bindings.py, the other statements in statements.py."""

from __future__ import annotations

import ast

from omni_errors_audit import names as N
from omni_errors_audit.annotations import (
    beside_error_response,
    carries_nothing,
    decorator_models,
    field_annotations,
    named,
)
from omni_errors_audit.bindings import FUNCTIONS, TRY_STAR
from omni_errors_audit.handling import on_every_path, raise_mentions, stored_and_raised
from omni_errors_audit.model import Handled, RawRaise, RawSite, Unanswered
from omni_errors_audit.predicates import lines_between
from omni_errors_audit.scope import Binding, HandlerFrame, Scope, callee_target, lookup, resolve
from omni_errors_audit.sockets import SocketFacts
from omni_errors_audit.source import SourceText, shape
from omni_errors_audit.statements import StatementVisitor


class FileVisitor(StatementVisitor):
    """Walks one parsed module and collects its sites, raises, classes and aliases.

    A `raise` is resolved to the class it raises (through aliases and local bindings) and classified
    project-wide later (project.py), because whether `Foo` derives from `VLLMError` may be decided in
    another file.
    """

    def __init__(
        self,
        module: str,
        is_package: bool,
        source: SourceText,
        hot_lines: list[int],
        annotated_lines: list[int],
        imports_zmq: bool,
        tracked: set[str],
        sockets: SocketFacts,
    ) -> None:
        super().__init__(module, is_package, source, hot_lines, imports_zmq, tracked, sockets)
        self.annotated_lines = annotated_lines
        self.raises: list[RawRaise] = []
        self.classes: dict[str, list[str]] = {}
        self.functions: list[str] = []
        self.members: dict[str, list[str]] = {}
        self.fields: dict[str, list[str]] = {}
        self.unanswered: list[Unanswered] = []
        self.handled: list[Handled] = []
        # OE202 clauses that store their exception, decided once the module's raises are known.
        self.stored: list[tuple[RawSite, str, set[str], tuple[tuple[str, int, str], ...]]] = []
        self.raise_names: list[tuple[str, frozenset[str]]] = []  # (function, what a raise mentions)
        self.reraises = 0
        self.dispatch = {
            **self.statement_handlers(),
            ast.Raise: self.raise_,
            ast.Try: self.try_,
            TRY_STAR: self.try_,
            ast.FunctionDef: self.function,
            ast.AsyncFunctionDef: self.function,
            ast.ClassDef: self.class_,
        }

    def run(self, tree: ast.Module) -> None:
        self.prebind(tree.body)
        self.body(tree.body)
        self.finish_signal_handlers()
        for site, function, stores, handoffs in self.stored:
            if stored_and_raised(function, stores, self.raise_names):
                continue
            if handoffs:
                self.handled.append(Handled(handoffs, site))
            else:
                self.sites.append(site)

    # -- raise -----------------------------------------------------------------------------------
    def raise_(self, s: ast.Raise) -> None:
        for frame in self.scope.handlers:
            frame.raised = True
        self.anchor = s
        self.raise_names.append((self.scope_name(), raise_mentions(s)))
        if self.scope.kind == "function":
            self.flow_raise(s)
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
            elif self.in_package(target):  # a class of the tree may be a client error: interprocedural.py
                handlers[-1].callees.append(f"={target}")
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
        if name is not None and added:
            self.exc_names[name] = tuple(sorted(c or "" for c in caught)) or ("builtins.BaseException",)
        try:
            self.body(h.body)
        finally:
            self.scope.handlers.pop()
            if name is not None and added:
                del self.exc_names[name]
        header_end = h.type.end_lineno if h.type is not None else h.lineno
        header = f"except {shape(h.type) if h.type is not None else ''} as {name or ''}"
        self.anchor = None
        if frame.value_error and frame.answer:
            self.add("OE201", h, f"`except ValueError` answers {frame.answer}", header_end, header)
        elif frame.value_error and (frame.callees or frame.message):  # decided in interprocedural.py
            site = self.site("OE201", h, "", header_end, header)
            message_in = self.function_key() if frame.message and self.scope.kind == "function" else ""
            self.unanswered.append(Unanswered(tuple(dict.fromkeys(frame.callees)), message_in, site))
        if frame.broad and not frame.raised:
            kind = "bare `except:`" if not types else "`except Exception`"
            site = self.site("OE202", h, f"{kind} without a raise swallows the error", header_end, header)
            done = on_every_path(h.body, name, self.callee_ref) if name else None
            if done is not None and (done.stores or done.handoffs):
                self.stored.append((site, self.scope_name(), done.stores, tuple(done.handoffs)))
            else:
                self.sites.append(site)

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
        if route or any(N.is_handler_decorator(d) for d in s.decorator_list):
            self.flows.setdefault(full, {})["e"] = 1  # its return is the response
        models = decorator_models(s.decorator_list) + named(s.returns) if route else []
        self.models.extend(self.references(parent, [*models, *beside_error_response(s.returns)]))
        args = s.args
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        positions = self.parameters(s, parent, full)
        if args.vararg is not None:
            params.append(args.vararg)
        if args.kwarg is not None:
            params.append(args.kwarg)
        signature_end = s.body[0].lineno - 1 if s.body else s.lineno
        exc_names = (
            {
                a.arg: self.annotated_classes(parent, a.annotation)
                for a in params
                if a.annotation is not None and N.is_exception_annotation(a.annotation)
            }
            if lines_between(self.annotated_lines, s.lineno, max(signature_end, s.lineno))
            else {}
        )
        owner = f"{self.module}.{parent.qualname}" if parent.kind == "class" else parent.owner
        scope = Scope(
            "function",
            qualname,
            parent=parent,
            route=route,
            lines=(s.lineno, s.end_lineno or s.lineno),
            params=positions,
            owner=owner,
            aliases={
                a.arg: a.arg
                for a in params
                if a.arg in positions and (a.annotation is None or not carries_nothing(a.annotation))
            },
        )
        tracked = self.tracked
        for a in params:
            if a.arg in tracked:
                scope.bind(a.arg, Binding("param"))
        saved, tests = self.exc_names, self.tests
        self.exc_names, self.tests = exc_names, []
        self.scope = scope
        try:
            self.body(s.body)
        finally:
            self.scope = parent
            self.exc_names, self.tests = saved, tests

    def annotated_classes(self, scope: Scope, annotation: ast.expr) -> tuple[str, ...]:
        found = []
        for node in named(annotation):
            target = resolve(scope, node)
            if target and target.rpartition(".")[2].endswith(("Error", "Exception")):
                found.append(target)
        return tuple(sorted(found)) or ("builtins.BaseException",)

    def references(self, scope: Scope, nodes: list[ast.expr]) -> list[str]:
        """The references (`=pkg.mod.Cls`) of the classes these annotation nodes name, where known."""
        return [f"={t}" for t in (resolve(scope, n) for n in nodes) if t and not t.startswith("builtins.")]

    def parameters(self, s: ast.FunctionDef | ast.AsyncFunctionDef, parent: Scope, full: str) -> dict[str, int]:
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
                if N.is_client_status(status):
                    self.flows.setdefault(full, {})["d"] = status
        return positions

    def class_(self, s: ast.ClassDef) -> None:
        parent = self.scope
        qualname = f"{parent.qualname}.{s.name}" if parent.qualname else s.name
        full = f"{self.module}.{qualname}"
        self.classes[full] = [b for b in (resolve(parent, base) for base in s.bases) if b]
        self.members[full] = [x.name for x in s.body if isinstance(x, FUNCTIONS)]
        fields = self.references(parent, field_annotations(s.body))
        if fields:
            self.fields[full] = fields
        if parent.kind != "module":
            parent.bind(s.name, Binding("class", full))
        for deco in s.decorator_list:
            self.expr(deco)
        scope = Scope("class", qualname, parent=parent, owner=parent.owner)
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
