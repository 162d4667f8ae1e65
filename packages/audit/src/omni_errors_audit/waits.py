"""OE303, waits without a deadline: `Queue.get`, `join`, `Event.wait`, torch.distributed Work handles,
blocking zmq and multiprocessing Pipe calls. A mixin of `ExpressionChecks` (checks.py)."""

from __future__ import annotations

import ast

from omni_errors_audit import names as N
from omni_errors_audit.predicates import has_star, is_none, keyword_value, mentions, routes_by_identity
from omni_errors_audit.scope import last_name, lookup
from omni_errors_audit.sockets import RECV, SEND, key as socket_key
from omni_errors_audit.state import WalkState


class WaitChecks(WalkState):
    """Calls that may wait forever, unless a timeout, deadline or non-blocking flag bounds them."""

    def wait(self, call: ast.Call, func: ast.Attribute) -> None:
        if self.scope.deadline or id(call) in self.wrapped or has_star(call):
            return
        attr = func.attr
        allowed = ("block", "timeout") if attr == "get" else ("timeout",)
        if any(kw.arg not in allowed for kw in call.keywords):
            return  # not the Queue/Thread/Event signature
        timeout = keyword_value(call, "timeout")
        if timeout is not None and not is_none(timeout):
            return
        args = call.args
        if attr == "get":
            block = args[0] if args else keyword_value(call, "block")
            if block is not None and not (type(block) is ast.Constant and block.value is True):
                return
            if len(args) > 1 and not is_none(args[1]):
                return
            if self.is_context_var(func.value):
                return
            kind = "Queue.get"
        else:
            if args and not is_none(args[0]):
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
        if self.scope.deadline or id(call) in self.wrapped or has_star(call):
            return
        receiving = name in N.ZMQ_RECV
        position = 0 if receiving else 1
        flags = keyword_value(call, "flags") or (call.args[position] if len(call.args) > position else None)
        if flags is not None and mentions(flags, N.ZMQ_NONBLOCKING):
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
        if not receiving and (text in sockets.routers or routes_by_identity(call)):
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

    def is_context_var(self, receiver: ast.expr) -> bool:
        if type(receiver) is not ast.Name:
            return False
        bindings = lookup(self.scope, receiver.id) or []
        return any(b.kind == "call" and b.last == N.CONTEXT_VAR for b in bindings)
