"""Codec workloads, each with its baselines: msgspec (`array_like` Struct, with and without the
record's validation), msgpack + a dataclass, and cloudpickle of an exception (today's path in
vLLM-Omni). Two kinds of record: the benchmark's sample record (a short validation error) and
realistic records built from corpus messages (`corpus.py`, 129 bytes on average, with a
`chatcmpl-<32 hex>` request id).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Annotated, Any, Literal

import cloudpickle
import msgpack
import msgspec
from omni_errors import OmniErrorDetails, decode, decode_many, encode, encode_into, peek
from omni_errors_tools.bench.corpus import MESSAGES

RECORD = OmniErrorDetails(
    message="max_tokens must be <= 4096, got 10000",
    category="client",
    status_code=400,
    error_type="BadRequestError",
    parameter="max_tokens",
    request_id="chatcmpl-7f3a9c",
    stage_id=0,
)
BATCH = 10_000

# What realistic failures look like: (category, status, error_type, parameter), cycled over the messages.
_KINDS: list[tuple[Literal["client", "server"], int, str, str | None]] = [
    ("client", 400, "BadRequestError", "messages[0].content"),
    ("server", 500, "InternalServerError", None),
    ("server", 503, "ServiceUnavailableError", None),
    ("client", 422, "UnprocessableEntityError", "voice"),
    ("server", 504, "GatewayTimeoutError", None),
]


def realistic_records() -> list[OmniErrorDetails]:
    """One record per corpus message, with a realistic request id, stage and kind."""
    records = []
    for i, message in enumerate(MESSAGES):
        category, status, error_type, parameter = _KINDS[i % len(_KINDS)]
        records.append(
            OmniErrorDetails(
                message,
                category,
                status,
                error_type,
                parameter=parameter,
                request_id=f"chatcmpl-{i:08x}{'5a1b9c3d7e2f4a6b8c0d1e2f' if i % 2 else '0f1e2d3c4b5a69788796a5b4'}",
                stage_id=i % 3,
            )
        )
    return records


class Plain(msgspec.Struct, array_like=True, frozen=True):
    """msgspec without validation; the header-like fields come first so a prefix can be peeked."""

    category: str
    fatal: bool
    status_code: int
    stage_id: int | None
    message: str
    error_type: str
    parameter: str | None = None
    request_id: str | None = None


class Validated(msgspec.Struct, array_like=True, frozen=True):
    """msgspec with the record's invariants: the fair baseline for decode+validate."""

    category: Literal["client", "server"]
    fatal: bool
    status_code: Annotated[int, msgspec.Meta(ge=400, le=599)]
    stage_id: Annotated[int, msgspec.Meta(ge=0, le=65534)] | None
    message: Annotated[str, msgspec.Meta(max_length=4096)]
    error_type: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)]
    parameter: Annotated[str, msgspec.Meta(max_length=128)] | None = None
    request_id: Annotated[str, msgspec.Meta(max_length=256)] | None = None

    def __post_init__(self) -> None:
        low = 400 if self.category == "client" else 500
        if not low <= self.status_code <= low + 99 or (self.fatal and self.category == "client"):
            raise ValueError("category and status disagree")  # omni-errors: ignore[OE101]: the baseline's own check


class Head(msgspec.Struct, array_like=True, frozen=True):
    """The first four fields only: msgspec's field-first peek."""

    category: str
    fatal: bool
    status_code: int
    stage_id: int | None


@dataclass(frozen=True)
class Record:
    message: str
    category: str
    status_code: int
    error_type: str
    parameter: str | None = None
    request_id: str | None = None
    stage_id: int | None = None
    fatal: bool = False


_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def _dataclass_decode(buf: bytes) -> Record:
    rec = Record(*msgpack.unpackb(buf))
    low = 400 if rec.category == "client" else 500
    if not (low <= rec.status_code <= low + 99 and _IDENT.match(rec.error_type) and len(rec.message) <= 4096):
        raise ValueError("invalid record")  # omni-errors: ignore[OE101]: the baseline's own check
    return rec


class StageError(Exception):
    """What vLLM-Omni pickles today: an exception with its attributes."""

    def __init__(self, message: str, status_code: int, error_type: str, stage_id: int | None) -> None:
        super().__init__(message, status_code, error_type, stage_id)
        self.status_code, self.error_type, self.stage_id = status_code, error_type, stage_id


@dataclass(frozen=True)
class Case:
    """One measured operation and its baselines; `targets` are the project's goals (the README's
    Benchmarks) as ratios to baselines (`records/s` a floor on throughput); `expected` checks what
    the measured call returns."""

    group: str
    ours: tuple[str, Callable[[], Any]]
    baselines: dict[str, Callable[[], Any]]
    targets: dict[str, float]
    per_item: int = 1
    expected: Any = None


def _plain(record: OmniErrorDetails) -> Plain:
    fields = record.to_dict()
    return Plain(**{k: fields[k] for k in Plain.__struct_fields__})


def _sample_cases() -> list[Case]:
    plain = _plain(RECORD)
    enc, plain_dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Plain)
    valid_dec, head_dec = msgspec.msgpack.Decoder(Validated), msgspec.msgpack.Decoder(Head)
    msgspec_frame, frame = enc.encode(plain), encode(RECORD)
    rec = Record(**RECORD.to_dict())
    packed = msgpack.packb(dataclasses.astuple(rec))
    exc = StageError(RECORD.message, 400, "BadRequestError", 0)
    pickled = cloudpickle.dumps(exc)
    list_dec = msgspec.msgpack.Decoder(list[Validated])
    batch, batch_msgspec = frame * BATCH, enc.encode([plain] * BATCH)
    return [
        Case(
            "encode",
            ("omni encode", lambda: encode(RECORD)),
            {
                "msgspec encode": lambda: enc.encode(plain),
                "msgpack+dataclass": lambda: msgpack.packb(dataclasses.astuple(rec)),
                "cloudpickle exception": lambda: cloudpickle.dumps(exc),
            },
            {"msgspec encode": 1.0},
        ),
        Case(
            "decode+validate",
            ("omni decode", lambda: decode(frame)),
            {
                "msgspec decode+validate": lambda: valid_dec.decode(msgspec_frame),
                "msgspec decode": lambda: plain_dec.decode(msgspec_frame),
                "msgpack+dataclass": lambda: _dataclass_decode(packed),
                "cloudpickle exception": lambda: cloudpickle.loads(pickled),
            },
            {"msgspec decode+validate": 0.6, "cloudpickle exception": 0.1},
            expected=RECORD,
        ),
        Case(
            "peek",
            ("omni peek", lambda: peek(frame)),
            {"msgspec peek": lambda: head_dec.decode(msgspec_frame)},
            {"msgspec peek": 0.5},
        ),
        Case(
            f"decode_many x{BATCH}",
            ("omni decode_many", lambda: decode_many(batch)),
            {"msgspec list decode+validate": lambda: list_dec.decode(batch_msgspec)},
            {"records/s": 5e6},
            per_item=BATCH,
        ),
    ]


def _realistic_cases() -> list[Case]:
    records = realistic_records()
    frames = [encode(r) for r in records]
    enc, valid_dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Validated)
    head_dec, list_dec = msgspec.msgpack.Decoder(Head), msgspec.msgpack.Decoder(list[Validated])
    plains = [_plain(r) for r in records]
    msgspec_frames = [enc.encode(p) for p in plains]
    n = len(records)
    repeat = BATCH // n
    batch, batch_msgspec = b"".join(frames) * repeat, enc.encode(plains * repeat)

    def read_all(decoded: list[Any]) -> int:
        return sum(len(d.message) + len(d.error_type) + len(d.request_id or "") for d in decoded)

    return [
        Case(
            "realistic: encode",
            ("omni encode", lambda: [encode(r) for r in records]),
            {"msgspec encode": lambda: [enc.encode(p) for p in plains]},
            {"msgspec encode": 1.0},
            per_item=n,
        ),
        Case(
            "realistic: decode+validate",
            ("omni decode", lambda: [decode(f) for f in frames]),
            {"msgspec decode+validate": lambda: [valid_dec.decode(f) for f in msgspec_frames]},
            {"msgspec decode+validate": 0.6},
            per_item=n,
            expected=records,
        ),
        Case(
            "realistic: decode+validate, then read every string",
            ("omni decode + read", lambda: read_all([decode(f) for f in frames])),
            {"msgspec decode+validate + read": lambda: read_all([valid_dec.decode(f) for f in msgspec_frames])},
            {},
            per_item=n,
        ),
        Case(
            "realistic: peek",
            ("omni peek", lambda: [peek(f) for f in frames]),
            {"msgspec peek": lambda: [head_dec.decode(f) for f in msgspec_frames]},
            {"msgspec peek": 0.5},
            per_item=n,
        ),
        Case(
            f"realistic: decode_many x{n * repeat}",
            ("omni decode_many", lambda: decode_many(batch)),
            {"msgspec list decode+validate": lambda: list_dec.decode(batch_msgspec)},
            {"records/s": 5e6},
            per_item=n * repeat,
        ),
        Case(
            f"realistic: decode_many x{n * repeat}, then read every string",
            ("omni decode_many + read", lambda: read_all(decode_many(batch))),
            {"msgspec list decode+validate + read": lambda: read_all(list_dec.decode(batch_msgspec))},
            {},
            per_item=n * repeat,
        ),
    ]


def cases() -> list[Case]:
    """Every codec workload: the sample record, then realistic records."""
    return _sample_cases() + _realistic_cases()


@contextlib.contextmanager
def shm_case() -> Iterator[Case]:
    """Decoding straight from a `SharedMemory.buf` view, for both codecs; the segment is removed on exit."""
    shm = shared_memory.SharedMemory(create=True, size=4096)
    views: list[memoryview] = []
    try:
        msgspec_frame = msgspec.msgpack.encode(_plain(RECORD))
        buf = shm.buf
        assert buf is not None  # typeshed marks it optional; it is set for an open segment
        n = encode_into(RECORD, buf, 0)
        buf[2048 : 2048 + len(msgspec_frame)] = msgspec_frame
        views += [buf[:n], buf[2048 : 2048 + len(msgspec_frame)]]
        ours, theirs = views
        valid_dec = msgspec.msgpack.Decoder(Validated)
        yield Case(
            "decode from shm view",
            ("omni decode", lambda: decode(ours)),
            {"msgspec decode+validate": lambda: valid_dec.decode(theirs)},
            {"msgspec decode+validate": 0.6},
            expected=RECORD,
        )
    finally:
        for view in views:
            view.release()
        shm.close()
        shm.unlink()
