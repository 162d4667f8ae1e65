"""HTTP statuses of calls and error bodies: the status a call answers with (OE201's 4xx answers) and
responses of an error body sent without one (OE204). A mixin of `ExpressionChecks` (checks.py)."""

from __future__ import annotations

import ast

from omni_errors_audit import names as N
from omni_errors_audit.predicates import has_key, is_error_maker, keyword_value
from omni_errors_audit.scope import last_name, lookup, resolve
from omni_errors_audit.state import WalkState


class StatusChecks(WalkState):
    """The status codes calls pass, and error bodies that go out without one."""

    def call_status(self, call: ast.Call, name: str) -> int | None:
        for kw in call.keywords:
            if kw.arg in N.STATUS_KEYWORDS:
                return self.status(kw.value)
        position = N.STATUS_POSITION.get(name)
        if position is not None and len(call.args) > position:
            return self.status(call.args[position])
        return 400 if name in N.DEFAULT_400_CALLS else None

    def status(self, node: ast.expr) -> int | None:
        if type(node) is ast.Constant:
            return node.value if type(node.value) is int else None
        target = resolve(self.scope, node)
        return N.status_value(target) if target else None

    def response_without_status(self, call: ast.Call, name: str) -> None:
        if len(call.args) >= 2 or keyword_value(call, "status_code") is not None:
            return
        content = call.args[0] if call.args else keyword_value(call, "content")
        if content is not None and self.is_error_body(content):
            self.add("OE204", call, f"`{name}` of an error body without `status_code` (sent as 200)")

    def is_error_body(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Dict):
            return has_key(node, "error")
        if isinstance(node, ast.Name):
            bindings = lookup(self.scope, node.id) or []
            return bool(bindings) and all(b.kind == "call" and is_error_maker(b.last) for b in bindings)
        if not isinstance(node, ast.Call):
            return False
        func = node.func
        if is_error_maker(last_name(func)):
            return True
        if type(func) is ast.Attribute and func.attr in N.ERROR_BODY_METHODS:
            receiver = func.value
            if type(receiver) is ast.Call:
                return is_error_maker(last_name(receiver.func))
            return "err" in last_name(receiver).lower()
        return False
