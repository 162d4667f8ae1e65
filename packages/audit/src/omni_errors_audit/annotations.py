"""The classes an annotation or a route decorator names: what a route answers with (its return
annotation, `response_model=`, `responses={...: {"model": X}}`), what a serving function returns beside
`ErrorResponse`, and the types of a class's fields. interprocedural.py turns them into response models."""

from __future__ import annotations

import ast

# Types whose values carry no error text and no exception (numbers, tensors, devices, modules): a parameter
# annotated with only these is not followed (flows.py), which keeps model code's flows small.
_INERT_TYPES = frozenset(
    {
        "int",
        "float",
        "bool",
        "complex",
        "Tensor",
        "ndarray",
        "Module",
        "device",
        "dtype",
        "Size",
        "Parameter",
        "Generator",
        "SymInt",
        "ProcessGroup",
        "Event",
        "Stream",
    }
)
_WRAPPERS = frozenset(
    {
        "list",
        "tuple",
        "set",
        "dict",
        "Optional",
        "Union",
        "Sequence",
        "Iterable",
        "Mapping",
        "List",
        "Tuple",
        "Dict",
        "Set",
        "None",
        "typing",
        "torch",
        "np",
        "numpy",
        "nn",
    }
)


def named(node: ast.expr | None) -> list[ast.expr]:
    """The Name and Attribute nodes an annotation names, string annotations (`"VideoError"`) parsed."""
    if node is None:
        return []
    out: list[ast.expr] = []
    stack: list[ast.expr] = [node]
    while stack:
        part = stack.pop()
        if type(part) is ast.Name or type(part) is ast.Attribute:
            out.append(part)
        elif type(part) is ast.Constant and type(part.value) is str:
            try:
                stack.append(ast.parse(part.value, mode="eval").body)
            except SyntaxError:
                continue
        elif type(part) is ast.Subscript:
            stack.extend((part.value, part.slice))
        elif type(part) is ast.BinOp:
            stack.extend((part.left, part.right))
        elif type(part) is ast.Tuple or type(part) is ast.List:
            stack.extend(part.elts)
    return out


def decorator_models(decorators: list[ast.expr]) -> list[ast.expr]:
    """`response_model=X` and the `"model"` values of `responses={...}` in route decorators."""
    out: list[ast.expr] = []
    for deco in decorators:
        if type(deco) is not ast.Call:
            continue
        for kw in deco.keywords:
            if kw.arg == "response_model":
                out.extend(named(kw.value))
            elif kw.arg == "responses" and type(kw.value) is ast.Dict:
                for entry in kw.value.values:
                    if type(entry) is ast.Dict:
                        for key, value in zip(entry.keys, entry.values, strict=True):
                            if type(key) is ast.Constant and key.value == "model":
                                out.extend(named(value))
    return out


def beside_error_response(returns: ast.expr | None) -> list[ast.expr]:
    """`-> BatchSpeechResponse | ErrorResponse`: what a serving function hands its route on success."""
    names = named(returns)
    last = [n.attr if type(n) is ast.Attribute else n.id for n in names]  # type: ignore[attr-defined]
    if "ErrorResponse" not in last:
        return []
    return [n for n, name in zip(names, last, strict=True) if name != "ErrorResponse"]


def field_annotations(body: list[ast.stmt]) -> list[ast.expr]:
    """The annotations of a class body's fields (`error: VideoError | None = None`)."""
    return [n for s in body if type(s) is ast.AnnAssign for n in named(s.annotation)]


def carries_nothing(annotation: ast.expr | None) -> bool:
    """`x: torch.Tensor`, `n: int | None`, `sizes: list[int]`: a parameter of these types is not followed."""
    names = [n.attr if type(n) is ast.Attribute else n.id for n in named(annotation)]  # type: ignore[attr-defined]
    kinds = [n for n in names if n not in _WRAPPERS]
    return bool(kinds) and all(k in _INERT_TYPES for k in kinds)
