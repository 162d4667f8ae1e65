"""Expression-level rules: the walk over expressions and the dispatch of calls to the check mixins
(waits.py, statuses.py, exception_text.py), plus exits and signal registrations. `FileVisitor`
(visitor.py) hands expressions here."""

from __future__ import annotations

import ast

from omni_errors_audit import names as N
from omni_errors_audit.exception_text import ExceptionTextChecks
from omni_errors_audit.flows import is_sink
from omni_errors_audit.predicates import is_none, is_sse_frame, keyword_value
from omni_errors_audit.scope import last_name, resolve
from omni_errors_audit.statuses import StatusChecks
from omni_errors_audit.waits import WaitChecks

_AST = ast.AST
_LEAVES = (ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del)


class ExpressionChecks(WaitChecks, StatusChecks, ExceptionTextChecks):
    """The checks that look inside expressions, over the shared state of one file's walk (state.py).

    Only expressions that can matter are walked: those inside `except` clauses and functions holding
    exception objects ("deep" code), and statements on lines the scanner's token filter marked (scan.py).
    That keeps the audit close to the cost of `ast.parse` alone.
    """

    def walk(self, root: ast.AST) -> None:
        """Visit every expression node under `root` (parents before children)."""
        deep = self.is_deep()
        stack: list[ast.AST] = [root]
        pop, push, extend = stack.pop, stack.append, stack.extend
        leaves = _LEAVES
        while stack:
            node = pop()
            t = type(node)
            if t in leaves:
                if t is ast.Name and node.id == "_exit":  # type: ignore[attr-defined]
                    self.os_exit(node)  # type: ignore[arg-type]
                continue
            if t is ast.Call:
                self.call(node, deep)  # type: ignore[arg-type]
            elif t is ast.Attribute:
                if node.attr == "_exit":  # type: ignore[attr-defined]
                    self.os_exit(node)  # type: ignore[arg-type]
            elif deep:
                if isinstance(node, ast.Compare):
                    self.compare(node)
                elif t is ast.Yield and node.value is not None and is_sse_frame(node.value):  # type: ignore[attr-defined]
                    self.yield_frame(node.value)  # type: ignore[attr-defined]
            for name in node._fields:
                value = getattr(node, name)
                if type(value) is list:
                    extend(v for v in value if isinstance(v, _AST))
                elif isinstance(value, _AST):
                    push(value)

    def os_exit(self, node: ast.expr) -> None:
        if resolve(self.scope, node) == "os._exit":
            self.add("OE301", node, "`os._exit` skips cleanup, `finally` blocks and atexit handlers")

    def call(self, call: ast.Call, deep: bool) -> None:
        func = call.func
        name = last_name(func)
        if type(func) is ast.Attribute:
            if name in N.WAIT_METHODS:
                self.wait(call, func)
            elif self.imports_zmq and (name in N.ZMQ_RECV or name in N.ZMQ_SEND):
                self.zmq_wait(call, name)
            elif name == "add_signal_handler" and len(call.args) >= 2:
                self.signals.register(self.scope, call.args[1])
            elif deep and name in N.MATCH_METHODS and self.exc_text(func.value):
                self.add("OE203", call, f"exception text tested with `.{name}()`")
            elif deep and name in N.REGEX_FUNCTIONS and any(self.exc_text(a) for a in call.args[:2]):
                self.add("OE203", call, f"exception text matched with `{name}()`")
        if name in ("exit", "_exit", "signal", "wait_for"):
            self.special_call(call, name)
        elif name in N.TASK_WRAPPERS and call.args and self.function_mentions("FIRST_COMPLETED"):
            self.wrapped.add(id(call.args[0]))  # raced against another task, usually the shutdown signal
        if name in N.RESPONSE_CLASSES:
            self.response_without_status(call, name)
        if deep:
            sink = is_sink(call, name)
            if sink:
                self.text_to_client(call, f"`{name}(...)`")
            elif name:
                self.forward(call, name)
            handlers = self.scope.handlers
            if handlers and handlers[-1].value_error and not handlers[-1].answer:
                status = self.call_status(call, name)
                if N.is_client_status(status):
                    handlers[-1].answer = f"`{name}` with status {status}"
                elif name in N.WEBSOCKET_SENDS and sink:
                    handlers[-1].answer = f"`{name}` (a WebSocket error reply: the client's fault)"
                elif status is None and name and not any(kw.arg in N.STATUS_KEYWORDS for kw in call.keywords):
                    ref = self.callee_ref(call.func)
                    if ref:
                        handlers[-1].callees.append(ref)

    def special_call(self, call: ast.Call, name: str) -> None:
        target = resolve(self.scope, call.func)
        if target in N.EXIT_CALLS:
            for frame in self.scope.handlers:
                frame.raised = True
            if target in N.SYSTEM_EXIT_CALLS:
                candidate = self.site("OE302", call, f"`{target.rpartition('.')[2]}()` raises SystemExit")
                self.signals.exit_in(self.function_key(), candidate)
        elif target == "signal.signal" and len(call.args) >= 2:
            self.signals.register(self.scope, call.args[1])
        elif name == "wait_for" and call.args:
            timeout = call.args[1] if len(call.args) > 1 else keyword_value(call, "timeout")
            if timeout is not None and not is_none(timeout):
                self.wrapped.add(id(call.args[0]))
