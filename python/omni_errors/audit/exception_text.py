"""Exception text: where it is tested or compared (OE203) and where it reaches a client, directly in a
sink or through a function the project pass follows (OE205). A mixin of `ExpressionChecks` (checks.py)."""

from __future__ import annotations

import ast

from omni_errors.audit import names as N
from omni_errors.audit.model import Forwarded
from omni_errors.audit.predicates import children, flatten, is_str, param_in
from omni_errors.audit.scope import resolve
from omni_errors.audit.state import WalkState


class ExceptionTextChecks(WalkState):
    """What evaluates to an exception's text, and the comparisons and client sinks that use it."""

    def compare(self, node: ast.Compare) -> None:
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            top = type(op)
            if top is ast.In or top is ast.NotIn:
                if self.exc_text(right):
                    self.add("OE203", node, "exception text tested with `in`")
                    return
            elif (top is ast.Eq or top is ast.NotEq) and (
                (is_str(right) and self.exc_text(left)) or (is_str(left) and self.exc_text(right))
            ):
                self.add("OE203", node, "exception text compared with a string")
                return
            left = right

    def exc_text(self, node: ast.expr) -> bool:
        """Whether `node` evaluates to the text of an exception object in scope."""
        if isinstance(node, ast.Name):
            return node.id in self.scope.tainted
        if isinstance(node, ast.Call):
            func = node.func
            args = node.args
            if type(func) is ast.Name:
                return func.id in ("str", "repr", "format") and bool(args) and self.is_exc(args[0])
            if type(func) is ast.Attribute:
                if func.attr in N.TEXT_METHODS:
                    return self.exc_text(func.value)
                if func.attr == "format" and is_str(func.value):
                    return any(self.is_exc(a) or self.exc_text(a) for a in args)
                return func.attr.startswith("format_exc") and resolve(self.scope, func) in N.TRACEBACK_TEXT
            return False
        if isinstance(node, ast.Subscript):
            return self.exc_text(node.value)
        if isinstance(node, ast.Attribute):
            return node.attr in N.TEXT_ATTRIBUTES and self.is_exc(node.value)
        if isinstance(node, ast.JoinedStr):
            return any(
                isinstance(v, ast.FormattedValue) and (self.is_exc(v.value) or self.exc_text(v.value))
                for v in node.values
            )
        if isinstance(node, ast.BinOp):
            op, left, right = type(node.op), node.left, node.right
            if op is ast.Mod and is_str(left):
                parts = right.elts if type(right) is ast.Tuple else [right]
                return any(self.is_exc(p) or self.exc_text(p) for p in parts)
            return op is ast.Add and (self.exc_text(left) or self.exc_text(right))
        return False

    def forward(self, call: ast.Call, name: str) -> None:
        """Exception text handed to a function: OE205 if the project pass finds that it reaches a client."""
        in_sink = id(call) in self.sink_args
        args = [(i, "", a) for i, a in enumerate(call.args)]
        args.extend((-1, kw.arg, kw.value) for kw in call.keywords if kw.arg)
        for position, keyword, arg in args:
            if id(arg) not in self.reported and self.exc_text(arg) and not self.is_public_text(arg):
                self.reported.add(id(arg))
                message = f"exception text passed to `{name}(...)`, which sends it to a client"
                self.forwarded.append(Forwarded(name, position, keyword, in_sink, self.site("OE205", arg, message)))

    def record_client_params(self, call: ast.Call) -> None:
        """Parameters of the enclosing function that this sink call sends to a client."""
        params = self.scope.params
        function = self.scope.qualname.rpartition(".")[2]
        for part in flatten([*call.args, *(kw.value for kw in call.keywords)]):
            param = param_in(part, params)
            if param is not None:
                entry = [params[param], param]
                found = self.client_params.setdefault(function, [])
                if entry not in found:
                    found.append(entry)

    def is_public_text(self, node: ast.expr) -> bool:
        """Text only of exceptions caught as client errors (`except OmniClientError as e: ... e.message`)."""
        public = self.public_names
        if not public:
            return False
        names = {n.id for n in ast.walk(node) if type(n) is ast.Name and n.id in self.exc_names}
        return bool(names) and names <= public

    def is_exc(self, node: ast.expr) -> bool:
        return type(node) is ast.Name and node.id in self.exc_names

    def text_to_client(self, node: ast.Call | ast.Dict, sink: str) -> None:
        if isinstance(node, ast.Call):
            parts = [*node.args, *(kw.value for kw in node.keywords)]
        else:
            parts = list(node.values)
        while parts:
            part = parts.pop()
            if id(part) in self.reported:
                continue
            if self.exc_text(part):
                self.reported.add(id(part))
                if not self.is_public_text(part):
                    self.add("OE205", part, f"exception text placed in {sink}")
                continue
            if isinstance(part, ast.Call):
                self.sink_args.add(id(part))  # a payload builder: followed by the project pass
            else:
                parts.extend(children(part))
