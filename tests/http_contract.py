"""The error contract of an HTTP server, as checks any test can run on a response: ours against
`omni-errors serve`, and the plugin's against vLLM-Omni.

- `error_body_problems(status, content_type, body[, echoed])`: what is wrong with one error response
  (empty when nothing): the record's shape (`{"error": {message, type, param, code[, request_id][,
  stage_id]}}` and nothing else), `error.code` equal to the HTTP status, and no internals in its text
  (a path, a traceback, an address, an internal attribute or private class, a credential; a name the
  client sent in the request's path and the message repeats is not one);
- `error_body_is_the_record`: the same as a Schemathesis check, registered on import
  (`@schemathesis.check`), so every `case.call_and_validate()` in a process that imports this
  module runs it; the CLI loads it with `SCHEMATHESIS_HOOKS=http_contract` (tests/ on `PYTHONPATH`).

It checks the output, not the sanitizer: the patterns are what a client must never read, written
independently of the rules that remove them (`omni_errors_tools.chaos.harness.LEAKS`, plus the
addresses and attribute names a fuzzer reached in vLLM-Omni's 500s).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

import schemathesis
from omni_errors_tools.chaos.harness import LEAKS

__all__ = ["INTERNALS", "error_body_is_the_record", "error_body_problems"]

#: Internals beyond `LEAKS`: a Python attribute error's wording and names, object reprs, a private
#: class as Python's own messages name it (`argument of type '_Unsupported'`, `'_Unsupported' object`),
#: addresses a server or a link binds (IPv4 with a port, ZMQ endpoints).
INTERNALS = re.compile(
    r"has no attribute|AttributeError|NoneType|object at 0x|<[\w.]+ object|\b__\w+__\b|type '_\w+'|'_\w+' object"
    r"|\b\d{1,3}(?:\.\d{1,3}){3}:\d+\b|\b(?:tcp|ipc|inproc)://"
)
_REQUIRED = {"message": str, "type": str, "code": int}
_OPTIONAL = {"request_id": str, "stage_id": int}
_TYPE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def error_body_problems(status: int, content_type: str | None, body: bytes, echoed: Iterable[str] = ()) -> list[str]:
    """Everything that is wrong with an error response (status >= 400); [] for a good one or a success.

    `echoed`: what the client sent in the request's path; a message may name it (`job __dict__ not
    found`), and a name the client chose is not an internal of the server (a path or a credential still is).
    """
    if status < 400:
        return []
    if not (content_type or "").startswith("application/json"):
        return [f"content type {content_type!r}, not application/json"]
    try:
        document: Any = json.loads(body)
    except ValueError:
        return ["the body is not JSON"]
    if not isinstance(document, dict) or set(document) != {"error"} or not isinstance(document["error"], dict):
        return ['the body is not {"error": {...}}']
    error: dict[str, Any] = document["error"]
    problems = [
        f"error.{k} is missing or not {t.__name__}" for k, t in _REQUIRED.items() if type(error.get(k)) is not t
    ]
    problems += [
        f"error.{k} is not {t.__name__}" for k, t in _OPTIONAL.items() if k in error and type(error[k]) is not t
    ]
    if "param" not in error or not (error["param"] is None or isinstance(error["param"], str)):
        problems.append("error.param is missing or not a string or null")
    if extra := set(error) - {*_REQUIRED, *_OPTIONAL, "param"}:
        problems.append(f"error has fields the record does not: {sorted(extra)}")
    if error.get("code") != status:
        problems.append(f"error.code {error.get('code')!r} is not the HTTP status {status}")
    if isinstance(error.get("type"), str) and not _TYPE.fullmatch(error["type"]):
        problems.append(f"error.type {error['type']!r} is not an identifier")
    sent = [value for value in echoed if value]
    for key in ("message", "param", "request_id"):
        text = error.get(key)
        if not isinstance(text, str):
            continue
        own = text
        for value in sent:
            own = own.replace(value, " ")
        if found := LEAKS.search(text) or INTERNALS.search(own):
            problems.append(f"error.{key} shows an internal: {found.group(0)!r}")
    return problems


@schemathesis.check
def error_body_is_the_record(ctx: schemathesis.CheckContext, response: schemathesis.Response, case: Any) -> None:
    """Schemathesis check: an error response is the record's envelope, and shows no internals."""
    content_type = next(iter(response.headers.get("content-type", [])), None)
    echoed = [str(value) for value in (getattr(case, "path_parameters", None) or {}).values()]
    problems = error_body_problems(response.status_code, content_type, response.content, echoed)
    if problems:
        raise AssertionError("; ".join(problems))
