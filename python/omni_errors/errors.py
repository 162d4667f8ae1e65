"""The library's own errors: what omni_errors raises about its input, never what a request's failure means.

A malformed or foreign frame (`DecodeError`), a buffer that cannot take a frame (`EncodeError`), a
record that breaks an invariant (`InvalidRecordError`). The semantic exceptions that describe a
request's failure (`OmniClientError`, `OmniEngineDeadError`, ...) are in `omni_errors.semantics.exceptions`;
classified, these library errors are internal server errors (500), whatever their `ValueError` base.

This module imports nothing heavy: the Rust extension raises these classes by this module path.
"""

from __future__ import annotations

__all__ = ["CodecError", "DecodeError", "EncodeError", "InvalidRecordError", "OmniErrorsError"]


class OmniErrorsError(Exception):
    """Base class of the library's own errors (not of the semantic exceptions in `omni_errors.semantics.exceptions`)."""


class InvalidRecordError(OmniErrorsError, ValueError):
    """An `OmniErrorDetails` field breaks an invariant; `field` names it."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class CodecError(OmniErrorsError, ValueError):
    """A frame could not be read or written; `offset` is the byte position, `field` the frame field."""

    def __init__(self, message: str, offset: int | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.offset = offset
        self.field = field


class DecodeError(CodecError):
    """Bytes are not a valid frame: truncated, foreign, corrupted, of an unsupported version or invalid."""


class EncodeError(CodecError):
    """A record could not be written, for example into a buffer that is too small or read-only."""
