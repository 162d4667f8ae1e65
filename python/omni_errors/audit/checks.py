"""Expression-level rules: calls (waits, exits, responses, sinks, 4xx answers), comparisons of
exception text, error dicts. `FileVisitor` (visitor.py) walks statements and hands expressions here.

Only expressions that can matter are walked: those inside `except` clauses and functions holding
exception objects ("deep" code), and statements on lines the scanner's token filter marked (scan.py).
That keeps the audit close to the cost of `ast.parse` alone.
"""

from __future__ import annotations

import ast
import re
from bisect import bisect_left
from typing import Any

from omni_errors.audit import names as N
from omni_errors.audit.model import Forwarded, RawSite
from omni_errors.audit.scope import Scope, last_name, lookup, resolve
from omni_errors.audit.signals import SignalHandlers
from omni_errors.audit.sockets import RECV, SEND, SocketFacts
from omni_errors.audit.sockets import key as socket_key
from omni_errors.audit.source import SourceText, shape
from omni_errors.audit.source import digest as source_digest

_AST = ast.AST
_SERVES_CLIENTS = re.compile(r"^\s*(?:from|import)\s+(?:fastapi|starlette|aiohttp|websockets)\b", re.MULTILINE)
Located = ast.stmt | ast.expr | ast.ExceptHandler  # nodes with a source position
_LEAVES = (ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del)


class ExpressionChecks:
    """Shared state of one file's walk, and the checks that look inside expressions."""

    def __init__(
        self, module: str, source: SourceText, hot_lines: list[int], imports_zmq: bool, sockets: SocketFacts
    ) -> None:
        self.module = module
        self.source = source
        self.hot_lines = hot_lines
        self.imports_zmq = imports_zmq
        self.sockets = sockets
        self.torch_distributed = "torch.distributed" in source.text
        # Only a module that serves HTTP or WebSocket clients sends a bare `{"error": ...}` dict to one;
        # elsewhere (benchmarks, worker RPC replies) such a dict is internal.
        self.serves_clients = _SERVES_CLIENTS.search(source.text) is not None
        self.public_names: set[str] = set()  # exceptions caught as client errors: their message is public
        self.sink_args: set[int] = set()  # ids of calls that are arguments of a client sink
        self.client_params: dict[str, list[list[Any]]] = {}
        self.forwarded: list[Forwarded] = []
        self.function_texts: dict[tuple[int, int], str] = {}
        self.scope = Scope("module", "")
        self.sites: list[RawSite] = []
        self.exc_names: set[str] = set()  # exception objects visible at this point
        self.reported: set[int] = set()  # ids of exception-text nodes already reported (OE205)
        self.wrapped: set[int] = set()  # ids of calls under `asyncio.wait_for(..., timeout)`
        self.signals = SignalHandlers(module)
        # The statement, or header expression of a compound statement, that holds what is walked: part
        # of every fingerprint, so that two identical `str(e)` in different statements differ.
        self.anchor: ast.AST | None = None
        self.anchor_text: tuple[ast.AST | None, str] = (None, "")

    # -- helpers ---------------------------------------------------------------------------------
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

    def is_hot(self, node: Located) -> bool:
        return lines_between(self.hot_lines, node.lineno, node.end_lineno or node.lineno)

    def is_deep(self) -> bool:
        """Inside an `except` clause, or where exception objects or their text are in scope."""
        scope = self.scope
        return bool(scope.handlers or self.exc_names or scope.tainted)

    # -- the walk --------------------------------------------------------------------------------
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
                elif isinstance(node, ast.Dict) and self.serves_clients and _has_key(node, "error"):
                    self.text_to_client(node, "an error body (`{'error': ...}`)")
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
        sink = name in N.CLIENT_SINKS or name.endswith("error_response") or _is_close_with_reason(call, name)
        if sink and self.scope.params:
            self.record_client_params(call)
        if deep:
            if sink:
                self.text_to_client(call, f"`{name}(...)`")
            elif name:
                self.forward(call, name)
            handlers = self.scope.handlers
            if handlers and handlers[-1].value_error and not handlers[-1].answer:
                status = self.call_status(call, name)
                if status is not None and 400 <= status < 500:
                    handlers[-1].answer = f"`{name}` with status {status}"
                elif name in N.WEBSOCKET_SENDS and sink:
                    handlers[-1].answer = f"`{name}` (a WebSocket error reply: the client's fault)"
                elif status is None and name and not any(kw.arg in N.STATUS_KEYWORDS for kw in call.keywords):
                    handlers[-1].callees.append(name)

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
            timeout = call.args[1] if len(call.args) > 1 else _keyword(call, "timeout")
            if timeout is not None and not _is_none(timeout):
                self.wrapped.add(id(call.args[0]))

    # -- OE303 -----------------------------------------------------------------------------------
    def wait(self, call: ast.Call, func: ast.Attribute) -> None:
        if self.scope.deadline or id(call) in self.wrapped or _has_star(call):
            return
        attr = func.attr
        allowed = ("block", "timeout") if attr == "get" else ("timeout",)
        if any(kw.arg not in allowed for kw in call.keywords):
            return  # not the Queue/Thread/Event signature
        timeout = _keyword(call, "timeout")
        if timeout is not None and not _is_none(timeout):
            return
        args = call.args
        if attr == "get":
            block = args[0] if args else _keyword(call, "block")
            if block is not None and not (type(block) is ast.Constant and block.value is True):
                return
            if len(args) > 1 and not _is_none(args[1]):
                return
            if self.is_context_var(func.value):
                return
            kind = "Queue.get"
        else:
            if args and not _is_none(args[0]):
                return
            if attr == "wait" and self.is_torch_work(func.value):
                self.add(
                    "OE303",
                    call,
                    "`.wait()` on a torch.distributed Work without a timeout (waits up to the process group's timeout)",
                )
                return
            kind = "Thread/Process.join" if attr == "join" else "Event.wait"
        self.add("OE303", call, f"`.{attr}()` without a timeout ({kind} waits forever)")

    def is_torch_work(self, receiver: ast.expr) -> bool:
        """A handle returned by a torch.distributed async call (`dist.isend(...).wait()`, `req.wait()`)."""
        if type(receiver) is ast.Call:
            callee = last_name(receiver.func)
            return callee in N.TORCH_WORK_CALLS or "isend" in callee or "irecv" in callee
        if not self.torch_distributed:
            return False
        text = ast.unparse(receiver).lower()
        return not any(word in text for word in ("event", "done", "stop", "ready", "closed", "wake", "lease"))

    def zmq_wait(self, call: ast.Call, name: str) -> None:
        if self.scope.deadline or id(call) in self.wrapped or _has_star(call):
            return
        receiving = name in N.ZMQ_RECV
        position = 0 if receiving else 1
        flags = _keyword(call, "flags") or (call.args[position] if len(call.args) > position else None)
        if flags is not None and _mentions(flags, N.ZMQ_NONBLOCKING):
            return
        receiver = call.func.value  # type: ignore[attr-defined]
        if self.is_pipe(receiver):
            wait = "without `poll(timeout)` waits forever" if receiving else "blocks while the reader does not read"
            self.add("OE303", call, f"multiprocessing Pipe `{name}()` {wait}")
            return
        option = RECV if receiving else SEND
        sockets = self.sockets
        text = socket_key(self.scope.qualname.rpartition(".")[2], ast.unparse(receiver))
        if option in sockets.timeouts.get(text, ()) or self.made_with(receiver, option):
            return  # RCVTIMEO/SNDTIMEO set on this socket, or by the function that made it
        if not receiving and (text in sockets.routers or _routes_by_identity(call)):
            return  # a ROUTER drops what it cannot send; it never blocks
        if receiving and self.function_mentions(".poll("):
            return  # received after a poll with its own timeout
        self.add("OE303", call, f"blocking zmq `{name}()` without NOBLOCK or a deadline")

    def is_pipe(self, receiver: ast.expr) -> bool:
        if type(receiver) is not ast.Name:
            return type(receiver) is ast.Attribute and "pipe" in receiver.attr.lower()
        bindings = lookup(self.scope, receiver.id) or []
        return "pipe" in receiver.id.lower() or any(b.kind == "call" and b.last == N.PIPE for b in bindings)

    def made_with(self, receiver: ast.expr, option: str) -> bool:
        """Whether `receiver` is bound to the result of a function of this module that sets `option`."""
        if type(receiver) is not ast.Name:
            return False
        makers = self.sockets.makers
        return any(b.kind == "call" and option in makers.get(b.last, ()) for b in lookup(self.scope, receiver.id) or [])

    def function_mentions(self, needle: str) -> bool:
        """Whether the source of the innermost enclosing function holds `needle`."""
        scope: Scope | None = self.scope
        while scope is not None and scope.kind != "function":
            scope = scope.parent
        if scope is None:
            return False
        text = self.function_texts.get(scope.lines)
        if text is None:
            first, last = scope.lines
            text = self.function_texts[scope.lines] = "\n".join(self.source.lines[first - 1 : last])
        return needle in text

    def is_context_var(self, receiver: ast.expr) -> bool:
        if type(receiver) is not ast.Name:
            return False
        bindings = lookup(self.scope, receiver.id) or []
        return any(b.kind == "call" and b.last == N.CONTEXT_VAR for b in bindings)

    # -- OE201 / OE204 ---------------------------------------------------------------------------
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
        if len(call.args) >= 2 or _keyword(call, "status_code") is not None:
            return
        content = call.args[0] if call.args else _keyword(call, "content")
        if content is not None and self.is_error_body(content):
            self.add("OE204", call, f"`{name}` of an error body without `status_code` (sent as 200)")

    def is_error_body(self, node: ast.expr) -> bool:
        if isinstance(node, ast.Dict):
            return _has_key(node, "error")
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

    # -- OE203 / OE205 ---------------------------------------------------------------------------
    def compare(self, node: ast.Compare) -> None:
        left = node.left
        for op, right in zip(node.ops, node.comparators, strict=True):
            top = type(op)
            if top is ast.In or top is ast.NotIn:
                if self.exc_text(right):
                    self.add("OE203", node, "exception text tested with `in`")
                    return
            elif (top is ast.Eq or top is ast.NotEq) and (
                (_is_str(right) and self.exc_text(left)) or (_is_str(left) and self.exc_text(right))
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
                if func.attr == "format" and _is_str(func.value):
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
            if op is ast.Mod and _is_str(left):
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
        for part in _flatten([*call.args, *(kw.value for kw in call.keywords)]):
            param = _param_in(part, params)
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
                parts.extend(_children(part))


def _children(part: ast.expr) -> list[ast.expr]:
    """The values a container or conditional expression puts into a sink's argument."""
    if isinstance(part, ast.Dict):
        return list(part.values)
    if isinstance(part, (ast.List, ast.Tuple, ast.Set)):
        return list(part.elts)
    if isinstance(part, ast.Starred):
        return [part.value]
    if isinstance(part, ast.IfExp):
        return [part.body, part.orelse]
    if isinstance(part, ast.BoolOp):
        return list(part.values)
    return []


def _flatten(parts: list[ast.expr]) -> list[ast.expr]:
    out: list[ast.expr] = []
    while parts:
        part = parts.pop()
        out.append(part)
        parts.extend(_children(part))
    return out


def _param_in(part: ast.expr, params: dict[str, int]) -> str | None:
    """The parameter whose value `part` is, or holds as text: `message`, `f"...{message}"`, `str(message)`."""
    if type(part) is ast.Name:
        return part.id if part.id in params else None
    if type(part) is ast.JoinedStr:
        for v in part.values:
            if type(v) is ast.FormattedValue and type(v.value) is ast.Name and v.value.id in params:
                return v.value.id
        return None
    if type(part) is ast.Call and type(part.func) is ast.Name and part.func.id in ("str", "repr") and part.args:
        return _param_in(part.args[0], params)
    if type(part) is ast.BinOp:
        return _param_in(part.left, params) or _param_in(part.right, params)
    return None


def _is_close_with_reason(call: ast.Call, name: str) -> bool:
    """`websocket.close(code=1011, reason=str(e))`: the close reason reaches the client."""
    return name == "close" and _keyword(call, "reason") is not None


def _routes_by_identity(call: ast.Call) -> bool:
    """`send_multipart([identity, ...])`: a ROUTER's reply, addressed by the peer's identity frame."""
    frames = call.args[0] if call.args else None
    if type(frames) is not ast.List or not frames.elts:
        return False
    first = frames.elts[0]
    return type(first) is ast.Name and "ident" in first.id.lower()


def lines_between(lines: list[int], first: int, last: int) -> bool:
    """Whether the sorted `lines` hold a line in first..last."""
    i = bisect_left(lines, first)
    return i < len(lines) and lines[i] <= last


def _keyword(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def _has_star(call: ast.Call) -> bool:
    return any(type(a) is ast.Starred for a in call.args) or any(kw.arg is None for kw in call.keywords)


def _is_none(node: ast.expr) -> bool:
    return type(node) is ast.Constant and node.value is None


def _is_str(node: ast.expr) -> bool:
    return type(node) is ast.Constant and type(node.value) is str


def _has_key(node: ast.Dict, key: str) -> bool:
    return any(type(k) is ast.Constant and k.value == key for k in node.keys)


def is_error_maker(name: str) -> bool:
    """`ErrorResponse` and vLLM-style `create_error_response` helpers."""
    return name == "ErrorResponse" or name.endswith("error_response")


def _mentions(node: ast.expr, names: frozenset[str]) -> bool:
    return any(
        (type(n) is ast.Attribute and n.attr in names) or (type(n) is ast.Name and n.id in names)
        for n in ast.walk(node)
    )
