"""Type stubs for the Rust extension `omni_errors._native` (record, frame codec, sanitizer)."""

from typing import Any, Final, Literal, SupportsIndex, final

from _typeshed import structseq
from typing_extensions import Buffer, Self

__version__: Final[str]
FRAME_MAJOR: Final[int]
FRAME_MINOR: Final[int]
RULE_SET: Final[int]
"""The sanitizer rule set of this build; frames record the rule set that cleaned their text."""
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

    A record decoded from a frame keeps the frame and makes each string when it is first read.

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
    @property
    def rule_set(self) -> int:
        """The sanitizer rule set that cleaned `message` and `parameter`: `RULE_SET` for a record
        built here, the frame's for one decoded from a frame of this rule set or with
        `sanitize=False`. Written into the record's frame."""
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

def decode(buffer: Buffer, /, *, sanitize: bool | None = None) -> OmniErrorDetails:
    """Decode exactly one frame that fills `buffer`, validating every field.

    Args:
        buffer: bytes, bytearray, memoryview (e.g. over `SharedMemory.buf`), `zmq.Frame`, mmap.
            The record keeps `buffer` when it is `bytes`, else one copy of it; its strings are
            made from it when first read.
        sanitize: whether `message` and `parameter` go through this build's sanitizer again.
            `None` (default): only when the frame was cleaned by another rule set than
            `RULE_SET` (older, newer, or not recorded). `True`: always (a peer you do not
            trust to be this library). `False`: never (the text is kept as the peer wrote it).

    Raises:
        DecodeError: truncated, foreign, corrupted, unsupported-version, invalid or trailing bytes;
            `.offset` is the byte position and `.field` the frame field.
    """

def decode_many(buffer: Buffer, /, *, sanitize: bool | None = None) -> list[OmniErrorDetails]:
    """Decode back-to-back frames filling `buffer`, each validated as by `decode`.

    The records share one copy of `buffer` (none when it is `bytes`); a record kept alive keeps
    that buffer alive.

    Raises:
        DecodeError: the first bad frame; `.offset` is counted from the start of `buffer`.
    """

@final
class Peek(structseq[Any], tuple[_Category, bool, int, int | None, int, int]):
    """A frame header, as `peek` reads it: a named tuple."""

    __match_args__: Final = ("category", "fatal", "status_code", "stage_id", "frame_len", "rule_set")
    @property
    def category(self) -> _Category: ...
    @property
    def fatal(self) -> bool: ...
    @property
    def status_code(self) -> int: ...
    @property
    def stage_id(self) -> int | None: ...
    @property
    def frame_len(self) -> int:
        """Bytes in the whole frame (the next frame of a batch starts there)."""
    @property
    def rule_set(self) -> int:
        """The sanitizer rule set that cleaned the frame's text (0: not recorded)."""

def peek(buffer: Buffer, /) -> Peek:
    """`Peek(category, fatal, status_code, stage_id, frame_len, rule_set)` from the 16-byte header, in O(1).

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
