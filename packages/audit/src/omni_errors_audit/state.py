"""`WalkState`: the shared state of one file's walk (scope, exception names, collected sites) and the
site builder every check uses; the check mixins (waits.py, statuses.py, exception_text.py) build on it."""

from __future__ import annotations

import ast
from typing import Any

from omni_errors_audit.model import Forwarded, Leak, RawSite, Returned
from omni_errors_audit.predicates import descendants, lines_between
from omni_errors_audit.scope import Scope
from omni_errors_audit.signals import SignalHandlers
from omni_errors_audit.sockets import SocketFacts
from omni_errors_audit.source import SourceText, digest as source_digest, shape

Located = ast.stmt | ast.expr | ast.ExceptHandler  # nodes with a source position


class WalkState:
    """Shared state of one file's walk, and the sites built from it."""

    def __init__(
        self, module: str, source: SourceText, hot_lines: list[int], imports_zmq: bool, sockets: SocketFacts
    ) -> None:
        self.module = module
        self.package = module.partition(".")[0] + "."  # the audited package: flows.py follows calls into it
        self.source = source
        self.hot_lines = hot_lines
        self.imports_zmq = imports_zmq
        self.sockets = sockets
        self.torch_distributed = "torch.distributed" in source.text
        self.sink_args: set[int] = set()  # ids of calls that are arguments of a client sink
        self.flows: dict[str, dict[str, Any]] = {}  # function -> its flows (flows.py)
        self.forwarded: list[Forwarded] = []
        self.leaks: list[Leak] = []
        self.returned: list[Returned] = []
        self.models: list[str] = []
        self.entries: list[str] = []
        self.renders: list[list[Any]] = []
        self.function_texts: dict[tuple[int, int], str] = {}
        self.scope = Scope("module", "")
        self.sites: list[RawSite] = []
        # Exception objects visible at this point -> the classes each was caught as (or annotated with).
        self.exc_names: dict[str, tuple[str, ...]] = {}
        self.reported: set[int] = set()  # ids of exception-text nodes already reported (OE205)
        self.leaked: set[int] = set()  # ids of exception-text nodes already placed in a sink
        self.tests: list[ast.expr] = []  # the tests of the `if` and `while` statements around this point
        self.wrapped: set[int] = set()  # ids of calls under `asyncio.wait_for(..., timeout)`
        self.signals = SignalHandlers(module)
        # The statement, or header expression of a compound statement, that holds what is walked: part
        # of every fingerprint, so that two identical `str(e)` in different statements differ.
        self.anchor: ast.AST | None = None
        self.anchor_text: tuple[ast.AST | None, str] = (None, "")

    def site(
        self, rule: str, node: Located, message: str, last_line: int | None = None, text: str | None = None
    ) -> RawSite:
        """A site at `node`; `text` replaces the node's shape in the fingerprint (an `except` header)."""
        line = node.lineno
        end = last_line or node.end_lineno or line
        scope = self.scope_name()
        own = shape(node) if text is None else text
        anchor = self.anchor
        context = "" if anchor is None or anchor is node else self.anchor_shape(anchor)
        digest = source_digest(self.source.key_path, scope, f"{context}\0{own}")
        column = self.source.column(line, node.col_offset)
        return RawSite(rule, line, column, end, scope, digest, self.source.excerpt(line), message)

    def add(
        self, rule: str, node: Located, message: str, last_line: int | None = None, text: str | None = None
    ) -> None:
        self.sites.append(self.site(rule, node, message, last_line, text))

    def anchor_shape(self, anchor: ast.AST) -> str:
        """The shape of the statement (or compound statement's header) being walked, computed once."""
        key, text = self.anchor_text
        if key is not anchor:
            text = shape(anchor)
            self.anchor_text = (anchor, text)
        return text

    def scope_name(self) -> str:
        return self.scope.qualname or "<module>"

    def function_key(self) -> str:
        return f"{self.module}.{self.scope.qualname}"

    def function_scope(self) -> Scope | None:
        """The innermost enclosing function scope."""
        scope: Scope | None = self.scope
        while scope is not None and scope.kind != "function":
            scope = scope.parent
        return scope

    def conditional(self, node: ast.expr) -> bool:
        """Whether an enclosing `if` of the current function tests a name that `node` holds
        (`if isinstance(error, OutOfMemoryError): raise error` fails only some errors)."""
        names = {n.id for n in descendants(node) if type(n) is ast.Name}
        return any(type(n) is ast.Name and n.id in names for test in self.tests for n in descendants(test))

    def flow(self) -> dict[str, Any]:
        """The flow record of the innermost enclosing function (flows.py), made on first use."""
        scope = self.function_scope()
        key = f"{self.module}.{scope.qualname}" if scope is not None else f"{self.module}.<module>"
        found = self.flows.get(key)
        if found is None:
            found = self.flows[key] = {}
        return found

    def is_hot(self, node: Located) -> bool:
        return lines_between(self.hot_lines, node.lineno, node.end_lineno or node.lineno)

    def is_deep(self) -> bool:
        """Inside an `except` clause, or where exception objects or their text are in scope."""
        scope = self.scope
        return bool(scope.handlers or self.exc_names or scope.tainted or scope.carriers)

    def function_mentions(self, needle: str) -> bool:
        """Whether the source of the innermost enclosing function holds `needle`."""
        scope = self.function_scope()
        if scope is None:
            return False
        text = self.function_texts.get(scope.lines)
        if text is None:
            first, last = scope.lines
            text = self.function_texts[scope.lines] = "\n".join(self.source.lines[first - 1 : last])
        return needle in text
