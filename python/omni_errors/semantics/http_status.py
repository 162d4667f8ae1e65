"""HTTP status helpers: a status's phrase, its category, and a record's `error_type`; imports nothing heavy.

Each rule here is written once for the Python side: what makes a valid `error_type` (the Rust
record's check, with its limit read from the extension), how a bare status maps to a category,
and how foreign text becomes an `error_type`.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Literal

from omni_errors._native import MAX_ERROR_TYPE_LEN

__all__ = [
    "Category",
    "category_for_status",
    "error_type_for",
    "identifier",
    "is_error_type",
    "phrase",
    "type_for_status",
]

Category = Literal["client", "server"]


def phrase(status: int) -> str:
    """The status' reason phrase, or a generic one for a status `http.HTTPStatus` does not know."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Client error" if status < 500 else "Server error"


def type_for_status(status: int) -> str:
    """OpenAI-style type for a status: its phrase as one identifier, `"Not Found"` -> `"NotFoundError"`.

    vLLM uses the bare phrase (with spaces) for `HTTPException` and `GracefulHTTPError`; a record's
    `error_type` must be an identifier, so the words are joined and suffixed the way OpenAI's SDK
    names its errors (`BadRequestError`, `NotFoundError`, `InternalServerError`).
    """
    try:
        text = HTTPStatus(status).phrase
    except ValueError:
        return "BadRequestError" if status < 500 else "InternalServerError"
    return identifier(text) or ("BadRequestError" if status < 500 else "InternalServerError")


def identifier(text: str) -> str:
    """`text` as an `error_type` identifier: words joined in CamelCase, suffixed `Error`; "" if nothing is left."""
    words = ["".join(ch for ch in word if ch.isascii() and ch.isalnum()) for word in text.replace("_", " ").split()]
    name = "".join(w[:1].upper() + w[1:] for w in words if w)
    if not name:
        return ""
    if name[0].isdigit():
        name = "E" + name
    return name if name.endswith("Error") else name + "Error"


def is_error_type(text: str) -> bool:
    """Whether `text` is a valid `error_type`: an ASCII identifier of at most `MAX_ERROR_TYPE_LEN`
    characters (the check `OmniErrorDetails` makes in Rust)."""
    return len(text) <= MAX_ERROR_TYPE_LEN and text.isascii() and text.isidentifier()


def error_type_for(text: object, status: int) -> str:
    """`text` as a record's `error_type`: kept when it is one, else made one ("Bad Request" ->
    "BadRequestError"), else the status's own type (`type_for_status`)."""
    if not isinstance(text, str):
        return type_for_status(status)
    if is_error_type(text):
        return text
    return identifier(text)[:MAX_ERROR_TYPE_LEN] or type_for_status(status)


def category_for_status(status: int) -> tuple[Category, int]:
    """The category a bare status implies, with the status a record may carry: 400-499 client,
    500-599 server, anything else a server 500 (a "status" that is not an error status is a server
    bug). Only for carriers that have nothing but a status: a record's category is never inferred."""
    if 400 <= status < 500:
        return "client", status
    if 500 <= status < 600:
        return "server", status
    return "server", 500
