"""Type stubs for the Rust extension `omni_errors._native` (record, frame codec, sanitizer)."""

from typing import Any, Final, Literal, SupportsIndex, final

from typing_extensions import Buffer, Self

__version__: Final[str]
FRAME_MAJOR: Final[int]
FRAME_MINOR: Final[int]
MAX_FRAME_LEN: Final[int]
MAX_MESSAGE_LEN: Final[int]
MAX_ERROR_TYPE_LEN: Final[int]
MAX_PARAMETER_LEN: Final[int]
MAX_REQUEST_ID_LEN: Final[int]
MAX_STAGE_ID: Final[int]

_Category = Literal["client", "server"]

@final
class OmniErrorDetails:
    """A validated, sanitized error record: what one failure means, on every transport.

    Invariants, enforced here and again when a frame is decoded: `client` carries 400-499 and
    `server` 500-599; `fatal` only for `server`; `error_type` is an ASCII identifier; strings are
    bounded (`MAX_*_LEN`, in UTF-8 bytes); `0 <= stage_id <= MAX_STAGE_ID`. `message` and
    `parameter` pass through `sanitize` (an over-long message is truncated with a marker).

    Raises:
        InvalidRecordError: a field breaks an invariant; `.field` names it.
    """

    __match_args__ = ("message", "category", "status_code", "error_type")
    def __new__(
        cls,
        message: str,
        category: _Category,
        status_code: int,
        error_type: str,
        parameter: str | None = None,
        request_id: str | None = None,
        stage_id: int | None = None,
        fatal: bool = False,
    ) -> Self: ...
    @property
    def message(self) -> str: ...
    @property
    def category(self) -> _Category: ...
    @property
    def status_code(self) -> int: ...
    @property
    def error_type(self) -> str: ...
    @property
    def parameter(self) -> str | None: ...
    @property
    def request_id(self) -> str | None: ...
    @property
    def stage_id(self) -> int | None: ...
    @property
    def fatal(self) -> bool: ...
    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` applied, validated and sanitized like a new record."""
    def to_dict(self) -> dict[str, Any]:
        """The eight fields as a JSON-ready dict."""
    @classmethod
    def from_dict(cls, data: dict[str, Any], /) -> Self:
        """The record for `to_dict()` output; unknown keys raise `TypeError`."""
    def to_frame(self) -> bytes:
        """The wire frame, same as `encode(self)`."""
    def __reduce_ex__(self, protocol: SupportsIndex, /) -> tuple[Any, ...]: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

def encode(details: OmniErrorDetails, /) -> bytes:
    """The record's frame (`docs/wire-format.md`) as new bytes."""

def encode_into(details: OmniErrorDetails, buffer: Buffer, /, offset: int = 0) -> int:
    """Write the frame into a writable buffer (bytearray, `SharedMemory.buf`, mmap) at `offset`.

    Returns:
        The number of bytes written.

    Raises:
        EncodeError: the buffer is read-only, not contiguous, or too small from `offset`.
    """

def decode(buffer: Buffer, /, *, sanitize: bool = True) -> OmniErrorDetails:
    """Decode exactly one frame that fills `buffer`, without copying the buffer.

    Args:
        buffer: bytes, bytearray, memoryview (e.g. over `SharedMemory.buf`), `zmq.Frame`, mmap.
        sanitize: re-apply the sanitizer to `message` and `parameter` (a peer may be older or buggy).

    Raises:
        DecodeError: truncated, foreign, corrupted, unsupported-version, invalid or trailing bytes;
            `.offset` is the byte position and `.field` the frame field.
    """

def decode_many(buffer: Buffer, /, *, sanitize: bool = True) -> list[OmniErrorDetails]:
    """Decode back-to-back frames filling `buffer`; the first bad frame raises `DecodeError`."""

def peek(buffer: Buffer, /) -> tuple[_Category, bool, int, int | None]:
    """`(category, fatal, status_code, stage_id)` from the 16-byte header, in O(1).

    Checks magic, version, length and header invariants but not the checksum: use it to route,
    and `decode` to trust.
    """

def sanitize(text: str, /, *, max_len: int = ...) -> str:
    """Return `text` safe for clients.

    Paths, tracebacks, memory addresses, credentials, media, tensor dumps, e-mails and internal
    hosts are replaced by markers (`<path>`, `<traceback>`, `<addr>`, `<secret>`, `<private-key>`,
    `<data>`, `<base64>`, `<bytes>`, `<tensor>`, `<email>`, `<ip>`, `<host>`); the result is at most
    `max_len` UTF-8 bytes (default `MAX_MESSAGE_LEN`), head and tail kept around `...<truncated>...`.
    Linear time and idempotent; returns `text` itself when nothing changes. See docs/sanitizer.md.

    Raises:
        UnicodeEncodeError: `text` holds lone surrogates.
    """

def normalize_parameter(name: str, /) -> str:
    """One spelling for a request field (`body.messages.0.content` -> `messages[0].content`).

    Sanitized and at most `MAX_PARAMETER_LEN` bytes; returns `name` itself when already normal.
    """
