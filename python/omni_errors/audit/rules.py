"""The audit's rules: one table that the visitor, the reporters, SARIF and `docs/audit.md` all read.

Each rule says precisely what it counts and what a static reading cannot know. `gated` rules are the
migration inventory: their new sites fail CI (exit 1). Semantic rules measure progress and notes report
what the audit could not decide; neither fails a run.
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
            "A valid suppression comment on a line where none of its codes reports a site.",
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
            "inner `except` clauses) calls something with a 4xx status: a `status_code`/`status`/`code` keyword "
            "or the positional status of `HTTPException`/`JSONResponse`/`create_error_response` that is a "
            "literal, an `HTTPStatus` member or a `status.HTTP_4xx_*` constant, or vLLM's "
            "`create_error_response(...)` without a status (it defaults to 400).",
            "Statuses computed at run time, and exception classes whose status is 4xx by definition "
            "(`raise OmniClientError(str(e))`).",
            "warning",
            True,
        ),
        Rule(
            "OE202",
            "broad-except-swallows",
            "broad `except` that swallows the error",
            "A bare `except:` or an `except` whose types include `Exception` or `BaseException`, whose body "
            "contains no `raise` statement and no `sys.exit`/`os._exit` call (outside nested functions). "
            "Logging and continuing, or returning a value, counts as swallowing.",
            "Whether a `raise` in the body runs on every path: one raise anywhere exempts the clause.",
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
            "Exception text (as in OE203) placed in an argument of a client-visible call: `HTTPException`, "
            "`WebSocketException`, `JSONResponse`-like responses, `ErrorResponse`, `ErrorInfo`, "
            "`*error_response(...)`, WebSocket `send_json`/`send_text`, and client-error classes whose message "
            "is public (`OmniClientError`, `GuardrailViolationError`, `VLLMValidationError`, ...); or in a dict "
            "literal with an `'error'` key. Each piece of exception text counts once.",
            "Text that reaches the client through a variable passed on to another function. Passing the "
            "exception object itself to vLLM's `create_error_response(e)` is not counted: vLLM maps it.",
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
            "zmq, `recv*`/`send*` calls without a `NOBLOCK`/`DONTWAIT` flag. Not counted: `x.get()` on a "
            "module-level `ContextVar`, the first argument of `asyncio.wait_for(..., timeout)`, and calls inside "
            "`with asyncio.timeout(...)` / `timeout_at` / `anyio.fail_after` / `move_on_after`.",
            "The receiver's type (an object with its own zero-argument `get()` is counted), socket options "
            "(`RCVTIMEO`), and a `poll(timeout)` before the call.",
            "warning",
            True,
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
            "A raise of an exception class from `omni_errors.exceptions.__all__` (e.g. `OmniConflictError`), or of a "
            "class defined in the audited tree that derives from one. These are counted here, not under OE901.",
            "As for OE901.",
            "none",
            False,
        ),
    )
}

SEMANTIC: Final = frozenset(code for code, rule in RULES.items() if rule.level == "none")


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
