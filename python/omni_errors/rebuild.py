"""`OmniErrorDetails` -> exception, by `category` (never by the status range).

The receiving side of a stage boundary raises what `rebuild` returns; `classify(rebuild(d)) == d`
for every record, because each rebuilt exception carries `d` itself as `.details`.
"""

from __future__ import annotations

import sys
import types

from omni_errors._native import OmniErrorDetails
from omni_errors.exceptions import OmniClientError, OmniEngineDeadError, OmniServerError

__all__ = ["rebuild"]


def rebuild(details: OmniErrorDetails) -> OmniClientError | OmniServerError | OmniEngineDeadError:
    """The exception to raise for a record received from another stage or process.

    - client -> `OmniClientError` (a `VLLMClientError`);
    - server and fatal -> `OmniEngineDeadError` (an `EngineDeadError`, so vLLM's fatal paths fire);
    - other server -> `OmniServerError` (a `VLLMServerError`).

    Each carries `details` unchanged, including the stage id and parameter.
    """
    if details.category == "client":
        return OmniClientError.from_details(details)
    if details.fatal:
        return OmniEngineDeadError(details.message, details=details)
    return OmniServerError.from_details(details)


class _CallableModule(types.ModuleType):
    """`omni_errors.rebuild` names both this module and its function.

    Importing the submodule makes Python set the package attribute to the module, which would hide
    the function; calling the module therefore calls the function, whichever import came first.
    """

    def __call__(self, details: OmniErrorDetails, /) -> OmniClientError | OmniServerError | OmniEngineDeadError:
        return rebuild(details)


sys.modules[__name__].__class__ = _CallableModule
