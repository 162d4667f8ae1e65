"""What one function passes on, read statement by statement: the parameters that reach a client sink, a
`raise` or another function's arguments, and the calls whose results it returns, sends or passes on.
The project pass (interprocedural.py) joins these records across the tree. The base of the expression
checks (`ExceptionTextChecks`), which name callees the same way.

A function's record (plain JSON, cached with its file), each key present only when it has entries:

- "p": its parameters' positions as callers pass them (-1: keyword-only), once a parameter flows;
- "s": parameters placed in a client sink; "f": parameters raised, chained from or set on a future;
- "c": `[callee, position, keyword, parameter]`, a parameter passed to a callee (position -1: keyword);
- "rp": parameters its return value carries (`return {"message": message}`);
- "r": callees whose result it returns; "rs": callees whose result it places in a client sink;
- "rc": `[producer, consumer, position, keyword]`, one call's result passed to another callee;
- "e": 1 for a route or exception handler (its return is the response); "d": a 4xx status default.

Callees are references: `=pkg.mod.name` (resolved through the module's imports and definitions; only
names inside the audited package are kept), `@pkg.mod.Cls:m` (`self.m(...)` in a method of `Cls`),
`^pkg.mod.Cls:m` (`super().m(...)`), and `.m` for a method of an object the audit cannot know, matched by
name as a reviewer reads it, unless the name is a generic one (names.GENERIC_METHODS: `get`, `error`).

Only what the statement shows is read: the call at its top and the calls nested in that call's
arguments, through containers, f-strings and `str()`; a parameter's value is followed through locals
assigned from it (`payload = {"message": message}`), a call's result through locals bound to it.
"""

from __future__ import annotations

import ast
from sys import intern
from typing import Any

from omni_errors_audit import names as N
from omni_errors_audit.predicates import is_close_with_reason, is_sse_frame, is_str
from omni_errors_audit.scope import last_name, resolve
from omni_errors_audit.state import WalkState

# Values that carry neither a parameter's value nor a call's result on to a local.
_INERT = frozenset({ast.Constant, ast.Compare, ast.UnaryOp, ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp})
_WRAPPERS = frozenset({"str", "repr", "format", "dict", "list", "tuple"})  # `str(message)` carries `message`
_FUTURE_FAIL = frozenset({"set_exception"})
# The node types `sources` reads into (any other value carries nothing it follows: `x[i]`, `a < b`).
_READ = frozenset(
    {
        ast.Name,
        ast.Call,
        ast.JoinedStr,
        ast.FormattedValue,
        ast.Await,
        ast.Starred,
        ast.BinOp,
        ast.Dict,
        ast.List,
        ast.Tuple,
        ast.Set,
        ast.IfExp,
        ast.BoolOp,
        ast.Attribute,
    }
)


def is_sink(call: ast.Call, name: str) -> bool:
    """A call whose arguments a client receives (N.CLIENT_SINKS, `*error_response(...)`, a close reason)."""
    return name in N.CLIENT_SINKS or name.endswith("error_response") or is_close_with_reason(call, name)


def _carries(arg: ast.expr, aliases: dict[str, str], results: dict[str, Any]) -> bool:
    """Whether `sources(arg)` can find anything: a constant, a local that holds no parameter or result, an
    attribute other than a text one (`self.x`) or a subscript carries nothing."""
    t = type(arg)
    if t is ast.Name:
        return arg.id in aliases or arg.id in results  # type: ignore[attr-defined]
    if t is ast.Attribute:
        return arg.attr in N.TEXT_ATTRIBUTES  # type: ignore[attr-defined]
    return t in _READ


def _add(record: dict[str, Any], key: str, value: Any) -> None:
    """Add `value` to the list under `key` (once)."""
    found = record.get(key)
    if found is None:
        record[key] = [value]
    elif value not in found:
        found.append(value)


class FlowChecks(WalkState):
    """Records the flow facts of the function being walked (see the module docstring)."""

    def param_flow(self) -> dict[str, Any]:
        """The flow record of the function being walked, with its parameters' positions ("p")."""
        record = self.flow()
        if "p" not in record:
            scope = self.function_scope()
            record["p"] = dict(scope.params) if scope is not None else {}
        return record

    def callee_ref(self, func: ast.expr) -> str:
        # Interned: a file repeats its references, and pickling the result back from a worker stores each
        # interned string once.
        return intern(self._callee_ref(func))

    def _callee_ref(self, func: ast.expr) -> str:
        """The reference of a callee expression; "" for one that is not a name or attribute, or that names
        something outside the audited package (`torch.cat`, `len`: no flow of the tree is there)."""
        if type(func) is ast.Name:
            target = resolve(self.scope, func)
            if target:
                return f"={target}" if self.in_package(target) else ""
            return f".{func.id}"
        if type(func) is not ast.Attribute:
            return ""
        value = func.value
        owner = self.scope.owner
        if owner and type(value) is ast.Name and value.id in ("self", "cls"):
            return f"@{owner}:{func.attr}"
        if owner and type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "super":
            return f"^{owner}:{func.attr}"
        target = resolve(self.scope, func)
        if target:
            return f"={target}" if self.in_package(target) else ""
        return "" if func.attr in N.GENERIC_METHODS else f".{func.attr}"

    def in_package(self, target: str) -> bool:
        return target.startswith(self.package)

    def sources(self, node: ast.expr, calls: list[ast.Call]) -> list[tuple[str, Any]]:
        """What `node`'s value carries: ("p", parameter), and ("c", call) for a call whose result it is
        made of, directly or through a local bound to it (a call of the value itself is also appended to
        `calls`, to be read in turn)."""
        out: list[tuple[str, Any]] = []
        aliases = self.scope.aliases
        results = self.scope.results
        stack = [node]
        pop, push, extend = stack.pop, stack.append, stack.extend
        while stack:
            part = pop()
            t = type(part)
            if t is ast.Name:
                param = aliases.get(part.id)  # type: ignore[attr-defined]
                if param is not None:
                    out.append(("p", param))
                else:
                    held = results.get(part.id)  # type: ignore[attr-defined]
                    if held:
                        out.extend(held)
            elif t is ast.Call:
                func = part.func  # type: ignore[attr-defined]
                args = part.args  # type: ignore[attr-defined]
                if type(func) is ast.Name and func.id in _WRAPPERS and args:
                    push(args[0])
                elif type(func) is ast.Attribute and (func.attr in N.DUMP_METHODS or func.attr in N.TEXT_METHODS):
                    push(func.value)
                    extend(args)
                    extend(kw.value for kw in part.keywords)  # type: ignore[attr-defined]
                elif type(func) is ast.Attribute and func.attr == "format" and is_str(func.value):
                    extend(args)
                else:
                    calls.append(part)  # type: ignore[arg-type]
                    out.append(("c", part))
            elif t is ast.JoinedStr:
                extend(part.values)  # type: ignore[attr-defined]
            elif t is ast.FormattedValue or t is ast.Await or t is ast.Starred:
                push(part.value)  # type: ignore[attr-defined]
            elif t is ast.BinOp:
                push(part.left)  # type: ignore[attr-defined]
                push(part.right)  # type: ignore[attr-defined]
            elif t is ast.Dict:
                extend(v for v in part.values if v is not None)  # type: ignore[attr-defined]
            elif t is ast.List or t is ast.Tuple or t is ast.Set:
                extend(part.elts)  # type: ignore[attr-defined]
            elif t is ast.IfExp:
                push(part.body)  # type: ignore[attr-defined]
                push(part.orelse)  # type: ignore[attr-defined]
            elif t is ast.BoolOp:
                extend(part.values)  # type: ignore[attr-defined]
            elif t is ast.Attribute and part.attr in N.TEXT_ATTRIBUTES:  # type: ignore[attr-defined]
                push(part.value)  # type: ignore[attr-defined]
        return out

    def produced(self, call: ast.Call) -> str:
        """The callee reference of a ("c", call) source."""
        return self.callee_ref(call.func)

    # -- statements ------------------------------------------------------------------------------
    def flow_statement(self, s: ast.stmt) -> None:
        """Assignments, returns and expression statements of a function body."""
        t = type(s)
        if t is ast.Expr:
            value = s.value  # type: ignore[attr-defined]
            if type(value) is ast.Await:
                value = value.value
            if type(value) is ast.Call:
                self.flow_call(value)
            elif type(value) is ast.Yield and value.value is not None and is_sse_frame(value.value):
                self.to_sink(value.value)
            return
        if t is ast.Return:
            value = s.value  # type: ignore[attr-defined]
            if value is None:
                return
            self.flows_out(value, param_key="rp", producer_key="r")
            return
        if t is ast.Assign or t is ast.AnnAssign or t is ast.AugAssign:
            value = s.value  # type: ignore[attr-defined]
            if value is None or type(value) in _INERT:
                return
            calls: list[ast.Call] = []
            found = self.sources(value, calls) if type(value) in _READ else []
            for call in calls:
                self.flow_call(call)
            targets = s.targets if t is ast.Assign else [s.target]  # type: ignore[attr-defined]
            names = [x.id for x in targets if type(x) is ast.Name]
            if not names:
                return
            params = [w for k, w in found if k == "p"]
            held = [item for item in found if item[0] != "p"]  # references are looked up where they are used
            scope = self.scope
            for name in names:
                if t is not ast.AugAssign:
                    scope.aliases.pop(name, None)
                    scope.results.pop(name, None)
                if params:
                    scope.aliases[name] = params[0]
                if held:
                    scope.results.setdefault(name, []).extend(held)

    def flow_raise(self, s: ast.Raise) -> None:
        """`raise param`, `raise X(...) from param`: the parameter fails the caller; `raise C(param)` passes it."""
        for part in (s.exc, s.cause):
            if part is None:
                continue
            if type(part) is ast.Name and part.id in self.scope.aliases and not self.conditional(part):
                _add(self.param_flow(), "f", self.scope.aliases[part.id])
            elif type(part) is ast.Call:
                self.flow_call(part)

    # -- calls -----------------------------------------------------------------------------------
    def flow_call(self, call: ast.Call, depth: int = 0) -> None:
        """A call's arguments: parameters and results that reach a sink, a future or a callee."""
        func = call.func
        name = last_name(func)
        if name == "add_exception_handler" and len(call.args) >= 2:
            handler = self.callee_ref(call.args[1])
            if handler:
                self.entries.append(handler)
        scope = self.scope
        aliases, results = scope.aliases, scope.results
        # The arguments that can carry something (`sources`); the common ones (constants, plain locals,
        # `self.x`) are ruled out here, before any lookup.
        args: list[tuple[int, str, ast.expr]] = []
        for position, arg in enumerate(call.args):
            if _carries(arg, aliases, results):
                args.append((position, "", arg))
        for kw in call.keywords:
            if kw.arg and _carries(kw.value, aliases, results):
                args.append((-1, kw.arg, kw.value))
        if not args:
            return
        sink = is_sink(call, name)
        fail = name in _FUTURE_FAIL and type(func) is ast.Attribute
        ref: str | None = "" if sink or fail else None  # looked up once an argument carries something
        for position, keyword, arg in args:
            nested: list[ast.Call] = []
            for kind, what in self.sources(arg, nested):
                if ref is None:
                    ref = self.callee_ref(func)
                if kind == "p":
                    if sink:
                        _add(self.param_flow(), "s", what)
                    elif fail:
                        if not self.conditional(arg):
                            _add(self.param_flow(), "f", what)
                    elif ref:
                        _add(self.param_flow(), "c", [ref, position, keyword, what])
                elif sink or ref:
                    producer = self.produced(what)
                    if producer and producer != ref:
                        if sink:
                            _add(self.flow(), "rs", producer)
                        else:
                            _add(self.flow(), "rc", [producer, ref, position, keyword])
            if depth < 4:
                for inner in nested:
                    self.flow_call(inner, depth + 1)

    def to_sink(self, node: ast.expr) -> None:
        """An expression that a client receives as it is (an SSE frame a generator yields)."""
        self.flows_out(node, param_key="s", producer_key="rs")

    def flows_out(self, node: ast.expr, *, param_key: str, producer_key: str) -> None:
        """Record where `node`'s parameters and produced values go (returned, or sent as they are)."""
        calls: list[ast.Call] = []
        for kind, what in self.sources(node, calls):
            if kind == "p":
                _add(self.param_flow(), param_key, what)
            else:
                producer = self.produced(what)
                if producer:
                    _add(self.flow(), producer_key, producer)
        for call in calls:
            self.flow_call(call)
