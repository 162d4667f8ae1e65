"""omni-errors: one meaning for every failure in a vLLM-Omni pipeline.

`import omni_errors` loads only the Rust extension (record, frame codec, sanitizer); it never
imports torch or vLLM, so relay processes stay light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_errors._native import (
    FRAME_MAJOR,
    FRAME_MINOR,
    MAX_ERROR_TYPE_LEN,
    MAX_FRAME_LEN,
    MAX_MESSAGE_LEN,
    MAX_PARAMETER_LEN,
    MAX_REQUEST_ID_LEN,
    MAX_STAGE_ID,
    RULE_SET,
    OmniErrorDetails,
    Peek,
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

if TYPE_CHECKING:  # resolved lazily by __getattr__ at run time (they import vLLM); `as` marks the re-export
    from omni_errors.classify import classify as classify
    from omni_errors.exceptions import GuardrailViolationError as GuardrailViolationError
    from omni_errors.exceptions import OmniClientError as OmniClientError
    from omni_errors.exceptions import OmniConflictError as OmniConflictError
    from omni_errors.exceptions import OmniEngineDeadError as OmniEngineDeadError
    from omni_errors.exceptions import OmniEngineGenerateError as OmniEngineGenerateError
    from omni_errors.exceptions import OmniNotImplementedError as OmniNotImplementedError
    from omni_errors.exceptions import OmniServerError as OmniServerError
    from omni_errors.exceptions import OmniServiceUnavailableError as OmniServiceUnavailableError
    from omni_errors.exceptions import OmniStageTimeoutError as OmniStageTimeoutError
    from omni_errors.rebuild import rebuild as rebuild

__all__ = [
    "FRAME_MAJOR",
    "FRAME_MINOR",
    "MAX_ERROR_TYPE_LEN",
    "MAX_FRAME_LEN",
    "MAX_MESSAGE_LEN",
    "MAX_PARAMETER_LEN",
    "MAX_REQUEST_ID_LEN",
    "MAX_STAGE_ID",
    "RULE_SET",
    "CodecError",
    "DecodeError",
    "EncodeError",
    "InvalidRecordError",
    "OmniErrorDetails",
    "OmniErrorsError",
    "Peek",
    "__version__",
    "decode",
    "decode_many",
    "encode",
    "encode_into",
    "normalize_parameter",
    "peek",
    "sanitize",
]

# The semantic layer imports vLLM (and torch); it is resolved on first use so that
# `import omni_errors` stays light for relay processes.
_LAZY = {
    "classify": "omni_errors.classify",
    "rebuild": "omni_errors.rebuild",
    "GuardrailViolationError": "omni_errors.exceptions",
    "OmniClientError": "omni_errors.exceptions",
    "OmniConflictError": "omni_errors.exceptions",
    "OmniEngineDeadError": "omni_errors.exceptions",
    "OmniEngineGenerateError": "omni_errors.exceptions",
    "OmniNotImplementedError": "omni_errors.exceptions",
    "OmniServerError": "omni_errors.exceptions",
    "OmniServiceUnavailableError": "omni_errors.exceptions",
    "OmniStageTimeoutError": "omni_errors.exceptions",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'omni_errors' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
