"""Errors raised by omni_errors itself (never by the failures it carries).

This module imports nothing heavy: the Rust extension raises these classes by name.
"""

from __future__ import annotations

__all__ = ["CodecError", "DecodeError", "EncodeError", "InvalidRecordError", "OmniErrorsError"]


class OmniErrorsError(Exception):
    """Base class for every error raised by omni_errors."""


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
