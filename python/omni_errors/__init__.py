"""omni-errors: one meaning for every failure in a vLLM-Omni pipeline.

`import omni_errors` loads only the Rust extension (record, frame codec, sanitizer); it never
imports torch or vLLM, so relay processes stay light. Two families of exceptions live here:

- the library's own errors (`omni_errors.errors`: `OmniErrorsError`, `CodecError`, `DecodeError`,
  `EncodeError`, `InvalidRecordError`): raised *by omni_errors* about its input, a malformed frame
  or an invalid record; they are imported eagerly (the Rust extension raises them by that path);
- the semantic exceptions (`omni_errors.exceptions`: `OmniClientError`, `OmniEngineDeadError`, ...):
  *what a request's failure means*, on vLLM's hierarchy. They, `classify` and `rebuild` import vLLM,
  so they are resolved on first use from the one table `_LAZY`, which also feeds `__all__` and `dir()`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_errors._native import (
    FRAME_MAJOR as FRAME_MAJOR,
)
from omni_errors._native import (
    FRAME_MINOR as FRAME_MINOR,
)
from omni_errors._native import (
    MAX_ERROR_TYPE_LEN as MAX_ERROR_TYPE_LEN,
)
from omni_errors._native import (
    MAX_FRAME_LEN as MAX_FRAME_LEN,
)
from omni_errors._native import (
    MAX_MESSAGE_LEN as MAX_MESSAGE_LEN,
)
from omni_errors._native import (
    MAX_PARAMETER_LEN as MAX_PARAMETER_LEN,
)
from omni_errors._native import (
    MAX_REQUEST_ID_LEN as MAX_REQUEST_ID_LEN,
)
from omni_errors._native import (
    MAX_STAGE_ID as MAX_STAGE_ID,
)
from omni_errors._native import (
    RULE_SET as RULE_SET,
)
from omni_errors._native import (
    OmniErrorDetails as OmniErrorDetails,
)
from omni_errors._native import (
    Peek as Peek,
)
from omni_errors._native import (
    __version__ as __version__,
)
from omni_errors._native import (
    decode as decode,
)
from omni_errors._native import (
    decode_many as decode_many,
)
from omni_errors._native import (
    encode as encode,
)
from omni_errors._native import (
    encode_into as encode_into,
)
from omni_errors._native import (
    normalize_parameter as normalize_parameter,
)
from omni_errors._native import (
    peek as peek,
)
from omni_errors._native import (
    sanitize as sanitize,
)
from omni_errors.errors import (
    CodecError as CodecError,
)
from omni_errors.errors import (
    DecodeError as DecodeError,
)
from omni_errors.errors import (
    EncodeError as EncodeError,
)
from omni_errors.errors import (
    InvalidRecordError as InvalidRecordError,
)
from omni_errors.errors import (
    OmniErrorsError as OmniErrorsError,
)
from omni_errors.lazy import lazy_names

if TYPE_CHECKING:  # resolved lazily by __getattr__ at run time (they import vLLM); `as` marks the re-export
    from omni_errors.classification import classify as classify
    from omni_errors.exceptions import GuardrailViolationError as GuardrailViolationError
    from omni_errors.exceptions import OmniClientError as OmniClientError
    from omni_errors.exceptions import OmniConflictError as OmniConflictError
    from omni_errors.exceptions import OmniEngineDeadError as OmniEngineDeadError
    from omni_errors.exceptions import OmniEngineGenerateError as OmniEngineGenerateError
    from omni_errors.exceptions import OmniNotImplementedError as OmniNotImplementedError
    from omni_errors.exceptions import OmniServerError as OmniServerError
    from omni_errors.exceptions import OmniServiceUnavailableError as OmniServiceUnavailableError
    from omni_errors.exceptions import OmniStageTimeoutError as OmniStageTimeoutError
    from omni_errors.exceptions import rebuild as rebuild

# The semantic layer imports vLLM (and torch); it is resolved on first use so that
# `import omni_errors` stays light for relay processes. `__all__` and `dir()` come from this table.
_LAZY = {
    "classify": "omni_errors.classification",
    "rebuild": "omni_errors.exceptions",
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
