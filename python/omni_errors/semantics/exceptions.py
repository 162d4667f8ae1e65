"""vLLM-Omni's semantic exceptions, on vLLM's own hierarchy: what a request's failure means.

Not to be confused with the library's own errors (`omni_errors.errors`: a bad frame, an invalid
record), which omni_errors raises about its input.

The generic classes (`VLLMValidationError`, `VLLMNotFoundError`, `EngineDeadError`, ...) are imported
from vLLM and used as they are; this module adds only the types with Omni behaviour (RFC, section 1)
and the two wire carriers `OmniClientError`/`OmniServerError`; `rebuild(details)` chooses the
exception to raise for a record received from another stage (by `category`, never by status range).

Importing this module imports vLLM (and so torch). `import omni_errors` never does: the package
resolves these names lazily on first attribute access.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from vllm.exceptions import VLLMClientError, VLLMServerError
from vllm.v1.engine.exceptions import EngineDeadError, EngineGenerateError

from omni_errors._native import OmniErrorDetails
from omni_errors.semantics.http_status import error_type_for

__all__ = [
    "GuardrailViolationError",
    "OmniClientError",
    "OmniConflictError",
    "OmniEngineDeadError",
    "OmniEngineGenerateError",
    "OmniNotImplementedError",
    "OmniServerError",
    "OmniServiceUnavailableError",
    "OmniStageTimeoutError",
    "rebuild",
]


class GuardrailViolationError(VLLMClientError):
    """A guardrail rejected the request content (400). `parameter` names the offending field, if any."""

    def __init__(self, message: str, *, parameter: str | None = None) -> None:
        super().__init__(message)
        self.parameter = parameter


class OmniConflictError(VLLMClientError):
    """An existing resource (e.g. an async job) is in a state incompatible with the request (409)."""


class _OmniServerStatusError(VLLMServerError):
    """A server-side failure with an optional stage id; its status comes from the classify table."""

    def __init__(self, message: str, *, stage_id: int | None = None) -> None:
        super().__init__(message)
        self.stage_id: int | None = stage_id


class OmniNotImplementedError(_OmniServerStatusError):
    """The invoked server operation is not implemented (501)."""


class OmniServiceUnavailableError(_OmniServerStatusError):
    """A required handler, pipeline or stage is unavailable (503); `retry_after` (seconds), when
    known, becomes the HTTP `Retry-After` header."""

    def __init__(self, message: str, *, stage_id: int | None = None, retry_after: int | None = None) -> None:
        super().__init__(message, stage_id=stage_id)
        self.retry_after: int | None = retry_after


class OmniStageTimeoutError(_OmniServerStatusError):
    """A stage or generation deadline expired (504)."""


class OmniEngineGenerateError(EngineGenerateError):
    """A nonfatal stage failure: one request fails, the stage keeps serving (500)."""

    def __init__(self, message: str = "Stage failed to generate a response", *, stage_id: int | None = None) -> None:
        super().__init__(message)
        self.stage_id: int | None = stage_id


class OmniEngineDeadError(EngineDeadError):
    """A fatal stage failure (500, fatal). Clients get `EngineDeadError.CLIENT_MESSAGE`.

    `str(exc)` is the log-oriented message: vLLM's `ENGINE_DEAD_MESSAGE`, or `message` when given.
    `details` is set when the error was rebuilt from a wire record.
    """

    def __init__(
        self,
        message: str | None = None,
        *,
        stage_id: int | None = None,
        details: OmniErrorDetails | None = None,
        suppress_context: bool = False,
    ) -> None:
        super().__init__(suppress_context=suppress_context)
        if message is not None:
            self.args = (message,)
        if details is not None and stage_id is None:
            stage_id = details.stage_id
        self.stage_id: int | None = stage_id
        self.details: OmniErrorDetails | None = details


class OmniClientError(VLLMClientError):
    """A client error carrying its canonical record (`.details`), e.g. one rebuilt from a stage frame.

    Keeps vLLM-Omni 0.30's constructor `(message, *, status_code=400, error_type="BadRequestError")`
    and its `message`/`status_code`/`error_type` attributes. Since 0.31 it derives from
    `VLLMClientError` instead of `ValueError`: catch `VLLMClientError` (see docs/migration.md).
    A status outside 400-499 raises `InvalidRecordError`.
    """

    def __init__(
        self,
        message: str,
        *,
        status_code: int = HTTPStatus.BAD_REQUEST,
        error_type: str = "BadRequestError",
        parameter: str | None = None,
        request_id: str | None = None,
        stage_id: int | None = None,
        details: OmniErrorDetails | None = None,
    ) -> None:
        if details is None:
            details = OmniErrorDetails(
                message,
                "client",
                int(status_code),
                error_type_for(error_type, int(status_code)),
                parameter=parameter,
                request_id=request_id,
                stage_id=stage_id,
            )
        super().__init__(details.message)
        self.details: OmniErrorDetails = details
        self.message: str = details.message
        self.status_code: int = details.status_code
        self.error_type: str = details.error_type

    @classmethod
    def from_details(cls, details: OmniErrorDetails) -> OmniClientError:
        """The carrier for a client record (`details.category == "client"`)."""
        return cls(details.message, details=details)

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__.from_details, (self.details,))


class OmniServerError(VLLMServerError):
    """A server error carrying its canonical record (`.details`): the twin of `OmniClientError`.

    A status outside 500-599 raises `InvalidRecordError`. `retry_after` (seconds), when set on a
    503, becomes the HTTP `Retry-After` header.
    """

    retry_after: int | None = None

    def __init__(
        self,
        message: str,
        *,
        status_code: int = HTTPStatus.INTERNAL_SERVER_ERROR,
        error_type: str = "InternalServerError",
        request_id: str | None = None,
        stage_id: int | None = None,
        fatal: bool = False,
        details: OmniErrorDetails | None = None,
    ) -> None:
        if details is None:
            details = OmniErrorDetails(
                message,
                "server",
                int(status_code),
                error_type_for(error_type, int(status_code)),
                request_id=request_id,
                stage_id=stage_id,
                fatal=fatal,
            )
        super().__init__(details.message)
        self.details: OmniErrorDetails = details
        self.message: str = details.message
        self.status_code: int = details.status_code
        self.error_type: str = details.error_type
        self.stage_id: int | None = details.stage_id

    @classmethod
    def from_details(cls, details: OmniErrorDetails) -> OmniServerError:
        """The carrier for a server record (`details.category == "server"`)."""
        return cls(details.message, details=details)

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.__class__.from_details, (self.details,))


def rebuild(details: OmniErrorDetails) -> OmniClientError | OmniServerError | OmniEngineDeadError:
    """The exception to raise for a record received from another stage or process.

    - client -> `OmniClientError` (a `VLLMClientError`);
    - server and fatal -> `OmniEngineDeadError` (an `EngineDeadError`, so vLLM's fatal paths fire);
    - other server -> `OmniServerError` (a `VLLMServerError`).

    Each carries `details` unchanged, including the stage id and parameter, so
    `classify(rebuild(d)) == d` for every record.
    """
    if details.category == "client":
        return OmniClientError.from_details(details)
    if details.fatal:
        return OmniEngineDeadError(details.message, details=details)
    return OmniServerError.from_details(details)
