"""The qualified names the audit recognises: raw builtins, vLLM's `VLLMError` family, omni-errors' types,
and the call names of responses, sinks and waits.

Static tables, because the audit reads code it never imports. `tests/audit/test_audit_names.py` checks
the two family tables against the real classes (vLLM's modules and `omni_errors.semantics.exceptions.__all__`).
"""

from __future__ import annotations

import ast
import builtins
import re
from http import HTTPStatus
from typing import Final

BUILTIN_NAMES: Final = frozenset(dir(builtins))

# Raw raise sites: the types vLLM's migration fallback still maps (ValueError/TypeError/OverflowError to
# 400, NotImplementedError to 501), plus RuntimeError, which the RFC inventories beside them.
RAW_RAISES: Final = {
    "builtins.ValueError": "OE101",
    "builtins.TypeError": "OE102",
    "builtins.RuntimeError": "OE103",
    "builtins.OverflowError": "OE104",
    "builtins.NotImplementedError": "OE105",
}

# Classes of vLLM's `VLLMError` hierarchy, by the module that defines them: every supported vLLM's
# (0.30 to 0.34), so code written against any of them is recognised.
VLLM_FAMILY_MODULES: Final = {
    "vllm.exceptions": (
        "VLLMError",
        "VLLMClientError",
        "VLLMServerError",
        "VLLMValidationError",
        "VLLMNotFoundError",
        "ChatTemplateResolutionError",
        "LoRAAdapterNotFoundError",
        "VLLMUnprocessableEntityError",
        "GenerationError",
        "RetryableRequestError",
        "GracefulHTTPError",
        "QueueOverflowError",
        "MaxQueuedTokensError",
        "ProfilerAlreadyActiveError",
        "EngineFaultedError",
    ),
    "vllm.v1.engine.exceptions": ("EngineGenerateError", "EngineDeadError"),
    "vllm.connections": ("HTTPResponseSizeExceededError",),
}
# The classes of the table an older tested vLLM (0.30, 0.33, 0.34) lacks: the first tested release with each.
VLLM_FAMILY_SINCE: Final = {
    "ChatTemplateResolutionError": (0, 33),
    "RetryableRequestError": (0, 33),
    "ProfilerAlreadyActiveError": (0, 33),
    "EngineFaultedError": (0, 34),
}
VLLM_FAMILY: Final = frozenset(f"{mod}.{name}" for mod, names in VLLM_FAMILY_MODULES.items() for name in names)

# omni-errors' semantic types (the exception classes of `omni_errors.semantics.exceptions.__all__`), under both paths.
OMNI_TYPES: Final = (
    "GuardrailViolationError",
    "OmniClientError",
    "OmniConflictError",
    "OmniEngineDeadError",
    "OmniEngineGenerateError",
    "OmniNotImplementedError",
    "OmniServerError",
    "OmniServiceUnavailableError",
    "OmniStageTimeoutError",
)
OMNI_FAMILY: Final = frozenset(
    f"{mod}.{name}" for mod in ("omni_errors", "omni_errors.semantics.exceptions") for name in OMNI_TYPES
)

BROAD_EXCEPTIONS: Final = frozenset({"builtins.Exception", "builtins.BaseException"})
# Calls that raise SystemExit; with `os._exit` they also end a handler without swallowing its error.
SYSTEM_EXIT_CALLS: Final = frozenset({"sys.exit", "builtins.exit"})
EXIT_CALLS: Final = SYSTEM_EXIT_CALLS | {"os._exit"}

# Calls whose arguments reach the client: responses, error envelopes, HTTP/WebSocket exceptions and the
# client-error classes whose message is rendered as the public message.
RESPONSE_CLASSES: Final = frozenset(
    {"JSONResponse", "ORJSONResponse", "UJSONResponse", "PlainTextResponse", "HTMLResponse", "Response"}
)
# Client-error classes: their message is the public message, and their status is 4xx by definition.
PUBLIC_ERRORS: Final = frozenset(
    {
        "OmniClientError",
        "GuardrailViolationError",
        "VLLMClientError",
        "VLLMValidationError",
        "VLLMNotFoundError",
        "VLLMUnprocessableEntityError",
    }
)
# Exceptions whose text is public: the client-error classes, and the HTTP exceptions whose detail a client
# receives as it is (passing it on is no new leak).
PUBLIC_TEXT: Final = PUBLIC_ERRORS | {"HTTPException", "WebSocketException"}
CLIENT_SINKS: Final = (
    RESPONSE_CLASSES
    | PUBLIC_ERRORS
    | frozenset({"HTTPException", "WebSocketException", "ErrorResponse", "ErrorInfo", "send_json", "send_text"})
)
WEBSOCKET_SENDS: Final = frozenset({"send_json", "send_text"})
# Method names that say nothing about the object they are called on (the builtin containers', logging's,
# queues' and futures', streams'): a call `obj.get(...)` of an unknown `obj` is not matched by name
# against the tree's functions called `get` (flows.py's `.m` references).
GENERIC_METHODS: Final = frozenset(
    name for kind in (dict, list, set, str, bytes, tuple, object) for name in dir(kind)
) | frozenset(
    {
        "debug",
        "info",
        "warning",
        "warn",
        "error",
        "exception",
        "critical",
        "fatal",
        "log",
        "put",
        "put_nowait",
        "get_nowait",
        "task_done",
        "qsize",
        "empty",
        "full",
        "join",
        "set_result",
        "set_exception",
        "result",
        "done",
        "cancel",
        "cancelled",
        "add_done_callback",
        "read",
        "write",
        "close",
        "flush",
        "send",
        "recv",
        "run",
        "start",
        "stop",
        "submit",
        "wait",
        "acquire",
        "release",
        "item",
        "tolist",
        "numpy",
        "cpu",
        "to",
        "cuda",
        "size",
        "view",
        "reshape",
    }
)
# Methods of vLLM's classes that send a parameter to the client (position, name), for a class of the tree
# that derives from them: `self.send_error(str(e))` in a subclass of vLLM's RealtimeConnection.
EXTERNAL_SINK_PARAMS: Final = {
    "vllm.entrypoints.speech_to_text.realtime.connection.RealtimeConnection.send_error": (0, "message"),
}
# Where a call takes the HTTP status positionally (index), besides the keywords in STATUS_KEYWORDS.
STATUS_POSITION: Final = {name: 1 for name in RESPONSE_CLASSES} | {"HTTPException": 0, "create_error_response": 2}
STATUS_KEYWORDS: Final = frozenset({"status_code", "status", "code", "http_status"})


def is_client_status(status: int | None) -> bool:
    """Whether a status the audit resolved answers the client's fault (4xx)."""
    return status is not None and 400 <= status < 500


# vLLM's `create_error_response(message, err_type, status_code=HTTPStatus.BAD_REQUEST, param)`.
DEFAULT_400_CALLS: Final = frozenset({"create_error_response"})
ROUTE_DECORATORS: Final = frozenset({"get", "post", "put", "patch", "delete", "head", "options", "api_route", "route"})
ERROR_BODY_METHODS: Final = frozenset({"model_dump", "model_dump_json", "dict", "json"})
# Calls whose result holds what their receiver or argument holds: the dump of a response object.
DUMP_METHODS: Final = frozenset(
    {"model_dump", "model_dump_json", "dict", "json", "to_dict", "dumps", "jsonable_encoder"}
)

# Exception text: what `str(e)` and friends produce.
TEXT_FUNCTIONS: Final = frozenset({"builtins.str", "builtins.repr", "builtins.format"})
TEXT_METHODS: Final = frozenset({"lower", "upper", "casefold", "strip", "lstrip", "rstrip", "split", "splitlines"})
TEXT_ATTRIBUTES: Final = frozenset({"args", "message", "msg", "detail", "reason", "strerror"})
TRACEBACK_TEXT: Final = frozenset(
    {"traceback.format_exc", "traceback.format_exception", "traceback.format_exception_only"}
)
MATCH_METHODS: Final = frozenset(
    {"startswith", "endswith", "find", "rfind", "index", "rindex", "count", "__contains__"}
)
REGEX_FUNCTIONS: Final = frozenset({"search", "match", "fullmatch", "findall", "finditer"})

# Waits: methods that block without a deadline when called without a timeout.
WAIT_METHODS: Final = frozenset({"get", "join", "wait"})
ZMQ_RECV: Final = frozenset({"recv", "recv_multipart", "recv_pyobj", "recv_json", "recv_string", "recv_serialized"})
ZMQ_SEND: Final = frozenset({"send", "send_multipart", "send_pyobj", "send_json", "send_string", "send_serialized"})
ZMQ_NONBLOCKING: Final = frozenset({"NOBLOCK", "DONTWAIT"})
DEADLINE_CONTEXTS: Final = frozenset({"timeout", "timeout_at", "fail_after", "move_on_after"})
DEADLINE_WRAPPERS: Final = frozenset({"wait_for"})
CONTEXT_VAR: Final = "ContextVar"
PIPE: Final = "Pipe"
BOUND_CALLS: Final = frozenset({CONTEXT_VAR, PIPE})  # names bound to these are tracked by the visitor
# Futures raced in `asyncio.wait(..., return_when=FIRST_COMPLETED)`: one of them is the shutdown signal.
TASK_WRAPPERS: Final = frozenset({"create_task", "ensure_future"})
# torch.distributed collectives and point-to-point calls that return a `Work` handle.
TORCH_WORK_CALLS: Final = frozenset(
    {"isend", "irecv", "all_reduce", "all_gather", "broadcast", "reduce_scatter", "all_to_all", "batch_isend_irecv"}
)

_STARLETTE_STATUS = re.compile(r"HTTP_(\d{3})_")


def status_value(qualname: str) -> int | None:
    """The HTTP status a resolved constant names: `http.HTTPStatus.BAD_REQUEST[.value]`, `status.HTTP_400_…`."""
    qualname = qualname.removesuffix(".value")
    head, _, last = qualname.rpartition(".")
    if head.endswith("HTTPStatus") and last in HTTPStatus.__members__:
        return int(HTTPStatus[last])
    match = _STARLETTE_STATUS.match(last)
    return int(match.group(1)) if match else None


def is_route_decorator(deco: ast.expr) -> bool:
    """`@router.post("/v1/...")`, `@app.get("/health")`: a route registration with a path."""
    if not isinstance(deco, ast.Call) or not isinstance(deco.func, ast.Attribute) or not deco.args:
        return False
    path = deco.args[0]
    return (
        deco.func.attr in ROUTE_DECORATORS
        and isinstance(path, ast.Constant)
        and isinstance(path.value, str)
        and path.value.startswith("/")
    )


def is_handler_decorator(deco: ast.expr) -> bool:
    """`@app.exception_handler(SomeError)`: the function's return is the response to the client."""
    return isinstance(deco, ast.Call) and isinstance(deco.func, ast.Attribute) and deco.func.attr == "exception_handler"


def is_exception_annotation(node: ast.expr) -> bool:
    """`e: Exception`, `exc: BaseException | None`, `err: "RuntimeError"`: names ending in Error/Exception."""
    if isinstance(node, ast.BinOp):
        return is_exception_annotation(node.left) or is_exception_annotation(node.right)
    if isinstance(node, ast.Subscript):
        return is_exception_annotation(node.slice)
    if isinstance(node, ast.Tuple):
        return any(is_exception_annotation(e) for e in node.elts)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        name = node.value.rpartition(".")[2]
    elif isinstance(node, ast.Attribute):
        name = node.attr
    elif isinstance(node, ast.Name):
        name = node.id
    else:
        return False
    return name.endswith(("Error", "Exception"))
