"""omni-errors: one meaning for every failure in a vLLM-Omni pipeline.

`import omni_errors` loads only the Rust extension (record, frame codec, sanitizer); it never
imports torch or vLLM, so relay processes stay light.
"""

from __future__ import annotations

from omni_errors._native import (
    FRAME_MAJOR,
    FRAME_MINOR,
    MAX_ERROR_TYPE_LEN,
    MAX_FRAME_LEN,
    MAX_MESSAGE_LEN,
    MAX_PARAMETER_LEN,
    MAX_REQUEST_ID_LEN,
    MAX_STAGE_ID,
    OmniErrorDetails,
    __version__,
    decode,
    decode_many,
    encode,
    encode_into,
    normalize_parameter,
    peek,
    sanitize,
)
from omni_errors.errors import CodecError, DecodeError, EncodeError, InvalidRecordError, OmniErrorsError

__all__ = [
    "FRAME_MAJOR",
    "FRAME_MINOR",
    "MAX_ERROR_TYPE_LEN",
    "MAX_FRAME_LEN",
    "MAX_MESSAGE_LEN",
    "MAX_PARAMETER_LEN",
    "MAX_REQUEST_ID_LEN",
    "MAX_STAGE_ID",
    "CodecError",
    "DecodeError",
    "EncodeError",
    "InvalidRecordError",
    "OmniErrorDetails",
    "OmniErrorsError",
    "__version__",
    "decode",
    "decode_many",
    "encode",
    "encode_into",
    "normalize_parameter",
    "peek",
    "sanitize",
]
