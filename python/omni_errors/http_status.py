"""HTTP status helpers: a status's phrase and its OpenAI-style `error_type`; imports nothing heavy."""

from __future__ import annotations

from http import HTTPStatus

__all__ = ["identifier", "phrase", "type_for_status"]


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
