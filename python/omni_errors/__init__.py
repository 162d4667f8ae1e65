"""omni-errors: one meaning for every failure in a vLLM-Omni pipeline.

`import omni_errors` loads only the Rust extension (record, frame codec, sanitizer); it never
imports torch or vLLM, so relay processes stay light. Two families of exceptions live here:

- the library's own errors (`omni_errors.errors`: `OmniErrorsError`, `CodecError`, `DecodeError`,
  `EncodeError`, `InvalidRecordError`): raised *by omni_errors* about its input, a malformed frame
  or an invalid record; they are imported eagerly (the Rust extension raises them by that path);
- the semantic exceptions (`omni_errors.semantics.exceptions`: `OmniClientError`, `OmniEngineDeadError`, ...):
  *what a request's failure means*, on vLLM's hierarchy. They, `classify` and `rebuild` import vLLM,
  so they are resolved on first use from the one table `_LAZY`, which also feeds `__all__` and `dir()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_errors._native import (
    FRAME_MAJOR as FRAME_MAJOR,
    FRAME_MINOR as FRAME_MINOR,
    MAX_ERROR_TYPE_LEN as MAX_ERROR_TYPE_LEN,
    MAX_FRAME_LEN as MAX_FRAME_LEN,
    MAX_MESSAGE_LEN as MAX_MESSAGE_LEN,
    MAX_PARAMETER_LEN as MAX_PARAMETER_LEN,
    MAX_REQUEST_ID_LEN as MAX_REQUEST_ID_LEN,
    MAX_STAGE_ID as MAX_STAGE_ID,
    RULE_SET as RULE_SET,
    OmniErrorDetails as OmniErrorDetails,
    Peek as Peek,
    __version__ as __version__,
    decode as decode,
    decode_many as decode_many,
    encode as encode,
    encode_into as encode_into,
    normalize_parameter as normalize_parameter,
    peek as peek,
    sanitize as sanitize,
)
from omni_errors.errors import (
    CodecError as CodecError,
    DecodeError as DecodeError,
    EncodeError as EncodeError,
    InvalidRecordError as InvalidRecordError,
    OmniErrorsError as OmniErrorsError,
)
from omni_errors.lazy import lazy_names

if TYPE_CHECKING:  # resolved lazily by __getattr__ at run time (they import vLLM); `as` marks the re-export
    from omni_errors.semantics.classification import classify as classify
    from omni_errors.semantics.exceptions import (
        GuardrailViolationError as GuardrailViolationError,
        OmniClientError as OmniClientError,
        OmniConflictError as OmniConflictError,
        OmniEngineDeadError as OmniEngineDeadError,
        OmniEngineGenerateError as OmniEngineGenerateError,
        OmniNotImplementedError as OmniNotImplementedError,
        OmniServerError as OmniServerError,
        OmniServiceUnavailableError as OmniServiceUnavailableError,
        OmniStageTimeoutError as OmniStageTimeoutError,
        rebuild as rebuild,
    )

# The semantic layer imports vLLM (and torch); it is resolved on first use so that
# `import omni_errors` stays light for relay processes. `__all__` and `dir()` come from this table.
_LAZY = {
    "classify": "omni_errors.semantics.classification",
    "rebuild": "omni_errors.semantics.exceptions",
    "GuardrailViolationError": "omni_errors.semantics.exceptions",
    "OmniClientError": "omni_errors.semantics.exceptions",
    "OmniConflictError": "omni_errors.semantics.exceptions",
    "OmniEngineDeadError": "omni_errors.semantics.exceptions",
    "OmniEngineGenerateError": "omni_errors.semantics.exceptions",
    "OmniNotImplementedError": "omni_errors.semantics.exceptions",
    "OmniServerError": "omni_errors.semantics.exceptions",
    "OmniServiceUnavailableError": "omni_errors.semantics.exceptions",
    "OmniStageTimeoutError": "omni_errors.semantics.exceptions",
}

_EAGER = [
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

__all__ = _EAGER + list(_LAZY)  # `from omni_errors import *` resolves the lazy names (importing vLLM)

__getattr__, __dir__ = lazy_names(__name__, _LAZY)
