"""The audit's rules: one table that the visitor, the reporters, SARIF and `docs/audit.md` all read.

Each rule says precisely what it counts and what a static reading cannot know. `gated` rules are the
migration inventory: their new sites fail CI (exit 1); each was measured at >= 90 % precision on a
hand-labelled sample of vllm-omni 0.30 (tests/audit/labels/). Semantic rules measure progress; advisory
rules (notes, and OE303, whose precision is below that bar) are reported and never fail a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

Level = Literal["error", "warning", "note", "none"]


@dataclass(frozen=True, slots=True)
class Rule:
    """One audit rule: its code, name, what it counts and what it cannot know."""

    code: str
    name: str
    title: str
    counts: str
    cannot_know: str
    level: Level
    gated: bool


_RAW_COUNTS = (
    "`raise {t}` and `raise {t}(...)`, also under an alias (`from builtins import {t} as E`, "
    "`builtins.{t}`), `raise {t}(...) from cause`, and `raise err` where every binding of `err` before "
    "the raise in the same scope is `{t}(...)`. A bare `raise` or `raise e` of a caught exception is a "
    "re-raise, not a new site."
)
_RAW_LIMITS = (
    "Subclasses of {t} defined elsewhere count as their own class, not as {t}. Instances built in "
    "another function or stored on an object (`raise self.err`) are counted by OE100 instead."
)


def _raw(code: str, exc: str, name: str, gated: bool = True) -> Rule:
    return Rule(
        code,
        name,
        f"raw `raise {exc}`",
        _RAW_COUNTS.format(t=exc),
        _RAW_LIMITS.format(t=exc),
        "warning",
        gated,
    )


RULES: Final[dict[str, Rule]] = {
    r.code: r
    for r in (
        Rule(
            "OE000",
            "unparsable-file",
            "file that cannot be audited",
            "A `.py` file that cannot be read, decoded (PEP 263) or parsed by the running Python's `ast`; "
            "the site is the syntax error's line. It is counted, never skipped.",
            "Code written for a newer Python than the one running the audit is reported here.",
            "error",
            True,
        ),
        Rule(
            "OE001",
            "invalid-suppression",
            "suppression comment without a reason or with an unknown code",
            "A `# omni-errors: ignore[CODE]` comment with no reason after it, with an unknown code, or with "
            "no code. It suppresses nothing.",
            "Nothing: the comment is read with `tokenize`, so text inside strings never counts.",
            "error",
            True,
        ),
        Rule(
            "OE002",
            "unused-suppression",
            "suppression comment that matches no site",
            "Each code of a valid suppression comment that reports no site on its line, also beside codes that "
            "do (`ignore[OE201,OE205]` on a `raise` line: the OE201 site is the `except` line).",
            "Nothing.",
            "note",
            False,
        ),
        Rule(
            "OE100",
            "unresolved-raise",
            "raise of a value whose class cannot be known",
            "A `raise` of an expression that does not name a class: a parameter, an attribute "
            "(`raise self.error`), a name bound to different things, a subscript, or the result of a function "
            "defined in the audited tree (`raise make_error()`).",
            "What such a value is at run time; some of these sites are raw ValueErrors.",
            "note",
            False,
        ),
        _raw("OE101", "ValueError", "raw-value-error"),
        _raw("OE102", "TypeError", "raw-type-error"),
        _raw("OE103", "RuntimeError", "raw-runtime-error"),
        _raw("OE104", "OverflowError", "raw-overflow-error"),
        _raw("OE105", "NotImplementedError", "raw-not-implemented-error"),
        Rule(
            "OE201",
            "value-error-as-4xx",
            "`except ValueError` that answers 4xx",
            "An `except` clause whose types include `ValueError` and whose body (outside nested functions and "
            "inner `except` clauses) answers the client with a 4xx: a call with a `status_code`/`status`/`code` "
            "keyword or the positional status of `HTTPException`/`JSONResponse`/`create_error_response` that is a "
            "literal, an `HTTPStatus` member or a `status.HTTP_4xx_*` constant; vLLM's `create_error_response(...)` "
            "without a status (it defaults to 400); a `raise` of a client-error class "
            "(`raise OmniClientError(str(e))`, 4xx by definition, a class of the tree deriving from one, or a "
            "protocol error of the tree as OE205 "
            "learns them); a WebSocket `send_json`/`send_text` error reply; or, followed across the tree as for "
            "OE205, a call to a function whose status parameter defaults to a 4xx or that sends its argument to the "
            "client (`_send_error`), or a returned message (a string, or the error's text) of a function whose "
            "return reaches a client (an adapter's `validate(request)`, whose message the speech route answers "
            "with a 400).",
            "Statuses computed at run time, and messages that reach a client through an attribute, a container or "
            "a queue, or through a protocol error the tree sends only where the audit cannot follow it.",
            "warning",
            True,
        ),
        Rule(
            "OE202",
            "broad-except-swallows",
            "broad `except` that swallows the error",
            "A bare `except:` or an `except` whose types include `Exception` or `BaseException`, whose body "
            "contains no `raise` statement and no `sys.exit`/`os._exit` call (outside nested functions), and that "
            "does not hand the exception on: on every path through the body it neither stores the exception (or "
            "its text) where a `raise` raises it or chains from it (`error = exc` ... `raise error` in the same "
            "function; `errors.append(f'{name}: {exc}')` ... `raise X('; '.join(errors))`; an attribute or module "
            "name raised anywhere in the module), nor passes it to a function of the tree whose parameter is "
            "raised, chained from, set on a future (`set_exception`) or passed on to such a function, outside "
            "any `if` that tests it. Still counted: logging and continuing, returning a value (an error result "
            "too), sending an error to a peer and going on, a store that no `raise` uses or that one path "
            "skips, and a hand-off to a function that raises only some errors (`if isinstance(error, X): raise`).",
            "Whether a `raise` in the body, or the later `raise` of what it stored, runs on every path: one "
            "anywhere exempts the clause. Exceptions handed on through a return value or a queue.",
            "warning",
            True,
        ),
        Rule(
            "OE203",
            "error-text-match",
            "error matched by its text",
            "A test of exception text: `in`/`not in` with exception text on the right, `==`/`!=` against a "
            "string literal, `.startswith`/`.endswith`/`.find`/... on it, or `re.search`/`match`/... over it. "
            "Exception text is `str(e)`, `repr(e)`, `format(e)`, `f'{e}'`, `e.args`, `e.message`, "
            "`traceback.format_exc()`, their `.lower()`-style transforms and slices, and local names assigned "
            "from them; `e` is a name bound by an enclosing `except ... as e` or a parameter annotated with "
            "an exception type.",
            "Text that reaches a comparison through another function, a container or an attribute.",
            "warning",
            True,
        ),
        Rule(
            "OE204",
            "error-body-without-status",
            "error body returned without an explicit status",
            "In a route function (a decorator call `x.get/post/put/patch/delete/api_route/route('/...')`), a "
            "`return` of `ErrorResponse(...)`, of a `*error_response(...)` call, of a dict with an `'error'` "
            "key, or of a local name bound only to those; anywhere, a `JSONResponse`-like call without "
            "`status_code` (keyword or second argument) whose content is such a dict, an `ErrorResponse(...)`, "
            "or `x.model_dump()` where `x`'s name contains `err`. FastAPI sends these with HTTP 200.",
            "Error objects under other names (`generator.model_dump()` after an `isinstance` test) and routes "
            "registered with `add_api_route`.",
            "warning",
            True,
        ),
        Rule(
            "OE205",
            "error-text-to-client",
            "`str(e)` placed in a client-visible field",
            "Exception text (as in OE203) that reaches a client: placed in an argument of a client-visible call "
            "(`HTTPException`, `WebSocketException`, `JSONResponse`-like responses, `ErrorResponse`, `ErrorInfo`, "
            "`*error_response(...)`, WebSocket `send_json`/`send_text`, `websocket.close(reason=...)`, and "
            "client-error classes whose message is public: `OmniClientError`, `GuardrailViolationError`, "
            "`VLLMValidationError`, ...) or in a server-sent event a generator yields (`yield f'data: ...'`); passed "
            "to a function or method of the tree whose parameter reaches such a sink, followed across the tree to a "
            "fixed point (module functions through imports, `self.m()` through the class, its bases and the "
            "overrides of its subclasses, vLLM's `RealtimeConnection.send_error`, and any function of the tree "
            "called inside a sink's argument: a payload builder); placed in a response model (a class whose "
            "instances reach a client that way, that a route names in its return annotation, `response_model` or "
            "`responses`, that a serving function returns beside `ErrorResponse`, or that types a field of a "
            "response model); returned by a function whose return reaches a client (a route's or exception "
            "handler's response, a sink's argument, a response model's field, or the return of such a function); "
            "or carried there by locals (`error = {'message': str(e)}` ... `yield f'data: {json.dumps(error)}'`). "
            "Each piece of exception text counts once. Not counted: the text of an exception caught as a "
            "client-error class, `HTTPException`, or a protocol error of the tree (a class whose caught instances a "
            "handler sends to a client with their own `code`, or re-raises as one), whose message is public; and "
            "error bodies that no route, handler or sink receives (a benchmark's result dict).",
            "Text stored in an attribute or a queue and rendered elsewhere (a job's error read back by another "
            "route). A method of an object whose class is unknown is matched by its name (`adapter.validate(...)` "
            "meets every `validate` of the tree), except names that say nothing of the object (`get`, `put`, "
            "`error`, ...). Passing the exception object itself to vLLM's `create_error_response(e)` is not "
            "counted: vLLM maps it.",
            "warning",
            True,
        ),
        Rule(
            "OE301",
            "os-exit",
            "`os._exit`",
            "Every use of `os._exit`, also as `from os import _exit` or under a module alias; each use (a "
            "call or a reference such as `atexit.register(os._exit)`) counts.",
            "Calls through `getattr` or a variable holding the function.",
            "warning",
            True,
        ),
        Rule(
            "OE302",
            "system-exit-in-signal-handler",
            "`SystemExit` raised inside a signal handler",
            "`raise SystemExit`, `sys.exit()` or `exit()` directly in the body of a function "
            "registered in the same module with `signal.signal(sig, handler)` or "
            "`loop.add_signal_handler(sig, handler)` (a plain function, a nested function, `self.method` of the "
            "enclosing class, a lambda, or `functools.partial` of one of those).",
            "Handlers registered in another module, and exits in functions the handler calls.",
            "warning",
            True,
        ),
        Rule(
            "OE303",
            "wait-without-deadline",
            "wait without a deadline",
            "`x.get()`, `x.get(True)`, `x.get(block=True)` (Queue.get), `x.join()` (Thread/Process.join), "
            "`x.wait()` (Event.wait) without a timeout or with `timeout=None`; and in a module that imports "
            "zmq, `recv*`/`send*` calls without a `NOBLOCK`/`DONTWAIT` flag (a multiprocessing `Pipe` and a "
            "torch.distributed `Work` are named as such). Not counted: `x.get()` on a `ContextVar` (annotated or "
            "not), the first argument of `asyncio.wait_for(..., timeout)`, calls inside `with asyncio.timeout(...)` "
            "/ `timeout_at` / `anyio.fail_after` / `move_on_after`, tasks raced in `asyncio.wait(..., "
            "FIRST_COMPLETED)`, zmq calls on a socket whose `RCVTIMEO`/`SNDTIMEO` is set in the module (or by the "
            "function that made it), receives in a function that polls, and ROUTER sends (they never block). "
            "Advisory: 39 % precise on the labelled vllm-omni sample, so reported, never gated.",
            "The receiver's type (an object with its own zero-argument `get()` is counted), whether an asyncio "
            "task's owner cancels it, and what bounds a wait elsewhere (a process group's timeout).",
            "warning",
            False,
        ),
        Rule(
            "OE901",
            "semantic-vllm",
            "semantic raise: vLLM's `VLLMError` family",
            "A raise (resolved as for OE101) of a class of vLLM's `VLLMError` hierarchy, or of a class defined "
            "in the audited tree that derives from one.",
            "Family members re-exported from other vLLM modules than the defining one.",
            "none",
            False,
        ),
        Rule(
            "OE902",
            "semantic-omni-errors",
            "semantic raise: omni-errors' types",
            "A raise of an exception class from `omni_errors.semantics.exceptions.__all__` (e.g. `OmniConflictError`), "
            "or of a class defined in the audited tree that derives from one. These are counted here, not under OE901.",
            "As for OE901.",
            "none",
            False,
        ),
    )
}

SEMANTIC: Final = frozenset(code for code, rule in RULES.items() if rule.level == "none")


def text_reference(width: int = 100) -> str:
    """The rule reference for a terminal (`--rules`): one block per rule, wrapped to `width` columns."""
    import textwrap

    out = []
    for r in RULES.values():
        gate = "gated" if r.gated else ("progress" if r.code in SEMANTIC else "advisory: reported, never gated")
        out.append(f"{r.code}  {r.name}  ({gate})")
        out.append(f"      {r.title.replace('`', '')}")
        for label, text in (("counts", r.counts), ("cannot know", r.cannot_know)):
            out.extend(
                textwrap.wrap(
                    text.replace("`", ""),
                    width=width,
                    initial_indent=f"      {label}: ",
                    subsequent_indent="        ",
                    break_on_hyphens=False,
                )
            )
        out.append("")
    return "\n".join(out)


def markdown_table() -> str:
    """The rule reference as Markdown: one row per rule (for `--rules` and docs/audit.md)."""
    lines = [
        "| code | name | gated | counts | cannot know |",
        "|---|---|---|---|---|",
    ]
    for r in RULES.values():
        gate = "yes" if r.gated else ("progress" if r.code in SEMANTIC else "no")
        lines.append(f"| {r.code} | `{r.name}`: {r.title} | {gate} | {r.counts} | {r.cannot_know} |")
    return "\n".join(lines) + "\n"
