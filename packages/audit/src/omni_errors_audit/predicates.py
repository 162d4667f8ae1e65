"""Pure AST predicates and helpers the checks and the statement walk share: keywords, constants,
sink-argument containers, sorted-line lookups. No state: each answers about the nodes it is given."""

from __future__ import annotations

import ast
from bisect import bisect_left
from collections.abc import Callable


def descendants(root: ast.AST) -> list[ast.AST]:
    """`root` and every node under it, in the order of `ast.walk` (breadth first) at a third of its cost
    (no generators)."""
    out = [root]
    extend, append, node_type = out.extend, out.append, ast.AST
    for node in out:  # grows while it is read: breadth first
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                extend([v for v in value if isinstance(v, node_type)])
            elif isinstance(value, node_type):
                append(value)
    return out


def children(part: ast.expr) -> list[ast.expr]:
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


def is_sse_frame(node: ast.expr) -> bool:
    """`f"data: {payload}\\n\\n"`, `"event: error\\ndata: " + body`: a server-sent event a generator yields."""
    while type(node) is ast.BinOp and type(node.op) is ast.Add:
        node = node.left
    if type(node) is ast.JoinedStr:
        if not node.values:
            return False
        node = node.values[0]
    return is_str(node) and node.value.startswith(("data:", "event:"))  # type: ignore[attr-defined]


def is_message(node: ast.expr, is_text: Callable[[ast.expr], bool]) -> bool:
    """A returned message: a string, an f-string, a concatenation of them, or exception text."""
    if is_str(node) or type(node) is ast.JoinedStr or is_text(node):
        return True
    if type(node) is ast.BinOp and type(node.op) in (ast.Add, ast.Mod):
        return is_message(node.left, is_text)
    return False


def is_close_with_reason(call: ast.Call, name: str) -> bool:
    """`websocket.close(code=1011, reason=str(e))`: the close reason reaches the client."""
    return name == "close" and keyword_value(call, "reason") is not None


def routes_by_identity(call: ast.Call) -> bool:
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


def keyword_value(call: ast.Call, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_star(call: ast.Call) -> bool:
    return any(type(a) is ast.Starred for a in call.args) or any(kw.arg is None for kw in call.keywords)


def is_none(node: ast.expr) -> bool:
    return type(node) is ast.Constant and node.value is None


def is_str(node: ast.expr) -> bool:
    return type(node) is ast.Constant and type(node.value) is str


def has_key(node: ast.Dict, key: str) -> bool:
    return any(type(k) is ast.Constant and k.value == key for k in node.keys)


def is_error_maker(name: str) -> bool:
    """`ErrorResponse` and vLLM-style `create_error_response` helpers."""
    return name == "ErrorResponse" or name.endswith("error_response")


def mentions(node: ast.expr, names: frozenset[str]) -> bool:
    return any(
        (type(n) is ast.Attribute and n.attr in names) or (type(n) is ast.Name and n.id in names)
        for n in descendants(node)
    )


def target_names(target: ast.expr) -> list[str]:
    """The names an assignment, loop or `with` target binds: `a`, `a, (b, *c)`."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for elt in target.elts for n in target_names(elt)]
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    return []
