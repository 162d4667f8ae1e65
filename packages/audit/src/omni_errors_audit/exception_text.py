"""Exception text: where it is tested or compared (OE203) and where it reaches a client (OE205): placed in
a sink, passed to a function or class of the tree, returned, or carried there by a local object. Which
calls, returns and exceptions reach a client is decided project-wide (interprocedural.py), so the sites
found here are kept as `Leak`, `Forwarded` and `Returned` records. A mixin of `ExpressionChecks`."""

from __future__ import annotations

import ast

from omni_errors_audit import names as N
from omni_errors_audit.flows import FlowChecks
from omni_errors_audit.model import Forwarded, Leak, RawSite, Returned
from omni_errors_audit.predicates import children, descendants, is_str
from omni_errors_audit.scope import Origin, resolve

_CODE_ATTRIBUTES = frozenset({"code", "error_code"})


class ExceptionTextChecks(FlowChecks):
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

    def caught(self, node: ast.expr) -> tuple[str, ...]:
        """The classes the exceptions whose text `node` holds were caught as (or annotated with)."""
        exc_names = self.exc_names
        tainted = self.scope.tainted
        found: set[str] = set()
        for n in descendants(node):
            if type(n) is ast.Name:
                if n.id in exc_names:
                    found.update(exc_names[n.id])
                elif n.id in tainted:
                    found.update(tainted[n.id])
        return tuple(sorted(found)) or ("",)

    def texts_in(self, part: ast.expr) -> list[Origin]:
        """Pieces of exception text a value is made of: directly, in containers and conditional
        expressions, in the dumps of objects (`chunk.model_dump_json()`), and carried by locals."""
        out: list[Origin] = []
        stack = [part]
        carriers = self.scope.carriers
        while stack:
            node = stack.pop()
            if self.exc_text(node):
                out.append(Origin(node, self.anchor, self.caught(node)))
            elif type(node) is ast.Name and node.id in carriers:
                out.extend(carriers[node.id])
            elif type(node) is ast.Call:
                func = node.func
                if type(func) is ast.Attribute and func.attr in N.DUMP_METHODS:
                    stack.append(func.value)
                    stack.extend(node.args)
            elif type(node) is ast.Await or type(node) is ast.FormattedValue:
                stack.append(node.value)
            elif type(node) is ast.JoinedStr:
                stack.extend(node.values)
            else:
                stack.extend(children(node))
        return out

    def carry(self, targets: list[str], value: ast.expr) -> None:
        """`error = {"message": str(e)}`, `chunk = Event(error=...)`: the locals now carry that text."""
        origins = self.texts_in(value)
        if type(value) is ast.Call:  # an object built from exception text carries it too
            for arg in [*value.args, *(kw.value for kw in value.keywords)]:
                origins.extend(self.texts_in(arg))
        carriers = self.scope.carriers
        for name in targets:
            if origins and not self.exc_text(value):
                carriers[name] = origins
            else:
                carriers.pop(name, None)

    def site_of(self, origin: Origin, rule: str, message: str) -> RawSite:
        saved, self.anchor = self.anchor, origin.anchor
        try:
            return self.site(rule, origin.node, message)
        finally:
            self.anchor = saved

    def forward(self, call: ast.Call, name: str) -> None:
        """Exception text handed to a function or class: OE205 if the project pass finds it reaches a client."""
        in_sink = id(call) in self.sink_args
        ref = self.callee_ref(call.func)
        if not ref:
            return
        args = [(i, "", a) for i, a in enumerate(call.args)]
        args.extend((-1, kw.arg, kw.value) for kw in call.keywords if kw.arg)
        message = f"exception text passed to `{name}(...)`, which sends it to a client"
        for position, keyword, arg in args:
            for origin in self.texts_in(arg):
                key = id(origin.node)
                if key in self.reported and origin.anchor is self.anchor:
                    continue  # already reported where it was placed (a carrier's text is reported again)
                self.reported.add(key)
                site = self.site_of(origin, "OE205", message)
                self.forwarded.append(Forwarded(ref, position, keyword, in_sink, origin.caught, site))
        self.render_evidence(call, "" if in_sink else ref, args)

    def render_evidence(self, call: ast.Call, consumer: str, args: list[tuple[int, str, ast.expr]]) -> None:
        """A caught exception's own error code passed with its text (`payload(exc.code, str(exc))`), or the
        exception itself handed to a payload builder in a sink: its class is a protocol error whose message
        is public (interprocedural.py decides once it knows what `consumer` does)."""
        exc_names = self.exc_names
        if not exc_names:
            return
        coded = {
            a.value.id
            for _, _, a in args
            if type(a) is ast.Attribute
            and a.attr in _CODE_ATTRIBUTES
            and type(a.value) is ast.Name
            and a.value.id in exc_names
        }
        for position, keyword, arg in args:
            if type(arg) is ast.Name and arg.id in exc_names and consumer == "" and id(call) in self.sink_args:
                self.renders.append([list(exc_names[arg.id]), "", position, keyword])
            elif coded and self.exc_text(arg):
                names = {n.id for n in descendants(arg) if type(n) is ast.Name} & coded
                for exc in names:
                    self.renders.append([list(exc_names[exc]), consumer, position, keyword])

    def is_exc(self, node: ast.expr) -> bool:
        return type(node) is ast.Name and node.id in self.exc_names

    def text_to_client(self, node: ast.Call, sink: str) -> None:
        parts = [*node.args, *(kw.value for kw in node.keywords)]
        message = f"exception text placed in {sink}"
        while parts:
            part = parts.pop()
            if id(part) in self.reported:
                continue
            if self.exc_text(part):
                self.reported.add(id(part))
                self.leaked.add(id(part))
                self.leaks.append(Leak(self.caught(part), self.site("OE205", part, message)))
                continue
            if type(part) is ast.Name and part.id in self.scope.carriers:
                self.leak(self.scope.carriers[part.id], message)
                continue
            if isinstance(part, ast.Call):
                func = part.func
                if type(func) is ast.Attribute and func.attr in N.DUMP_METHODS:  # `x.model_dump()` of a carrier
                    parts.append(func.value)
                    parts.extend(part.args)
                else:
                    self.sink_args.add(id(part))  # a payload builder: followed by the project pass
            else:
                parts.extend(children(part))
        self.render_in_sink(node)

    def leak(self, origins: list[Origin], message: str) -> None:
        """Pieces of exception text that a sink receives, each once."""
        for origin in origins:
            key = id(origin.node)
            if key in self.leaked:
                continue
            self.leaked.add(key)
            self.reported.add(key)
            self.leaks.append(Leak(origin.caught, self.site_of(origin, "OE205", message)))

    def render_in_sink(self, call: ast.Call) -> None:
        """`send_json({"code": exc.code, "message": str(exc)})`: the code and text go straight to the client."""
        exc_names = self.exc_names
        if not exc_names:
            return
        coded = {
            n.value.id
            for n in descendants(call)
            if type(n) is ast.Attribute
            and n.attr in _CODE_ATTRIBUTES
            and type(n.value) is ast.Name
            and n.value.id in exc_names
        }
        if not coded:
            return
        texts: set[str] = set()
        for n in descendants(call):
            if isinstance(n, ast.expr) and self.exc_text(n):
                texts.update(x.id for x in descendants(n) if type(x) is ast.Name and x.id in coded)
        for exc in texts:
            self.renders.append([list(exc_names[exc]), "", -1, ""])

    def yield_frame(self, value: ast.expr) -> None:
        """`yield f"data: {chunk.model_dump_json()}\\n\\n"` in a streaming response: an SSE frame."""
        self.leak(self.texts_in(value), "exception text placed in a server-sent event")

    def returned_text(self, value: ast.expr) -> None:
        """`return str(e)`, `return {"error": str(e)}`, `return payload`: what the function's caller gets."""
        origins = self.texts_in(value)
        if not origins:
            return
        function = self.function_key()
        message = "exception text returned to a caller that sends it to a client"
        for origin in origins:
            key = id(origin.node)
            if key in self.leaked:
                continue
            site = self.site_of(origin, "OE205", message)
            self.returned.append(Returned(function, origin.caught, site))
