"""Side-by-side codec benchmarks against named baselines, and the ratio table `omni-errors bench` prints.

The workloads live here once; `benches/test_bench_codec.py` runs the same callables under
pytest-benchmark. Baselines: msgspec (`array_like` Struct, with and without the record's
validation), msgpack + a dataclass, and cloudpickle of an exception (today's path in vLLM-Omni).
"""

from __future__ import annotations

import contextlib
import dataclasses
import re
import timeit
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from multiprocessing import shared_memory
from typing import Annotated, Any, Literal

import cloudpickle
import msgpack
import msgspec

from omni_errors import OmniErrorDetails, decode, decode_many, encode, encode_into, peek

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
            raise ValueError("category and status disagree")


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
        raise ValueError("invalid record")
    return rec


class StageError(Exception):
    """What vLLM-Omni pickles today: an exception with its attributes."""

    def __init__(self, message: str, status_code: int, error_type: str, stage_id: int | None) -> None:
        super().__init__(message, status_code, error_type, stage_id)
        self.status_code, self.error_type, self.stage_id = status_code, error_type, stage_id


@dataclass(frozen=True)
class Case:
    """One measured operation and its baselines; `targets` are DESIGN.md's goals as ratios to baselines."""

    group: str
    ours: tuple[str, Callable[[], Any]]
    baselines: dict[str, Callable[[], Any]]
    targets: dict[str, float]
    per_item: int = 1


def cases() -> list[Case]:
    fields = RECORD.to_dict()
    plain = Plain(**{k: fields[k] for k in Plain.__struct_fields__})
    enc, plain_dec = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(Plain)
    valid_dec, head_dec = msgspec.msgpack.Decoder(Validated), msgspec.msgpack.Decoder(Head)
    msgspec_frame = enc.encode(plain)
    frame = encode(RECORD)
    rec = Record(**fields)
    packed = msgpack.packb(dataclasses.astuple(rec))
    exc = StageError(RECORD.message, 400, "BadRequestError", 0)
    pickled = cloudpickle.dumps(exc)
    batch = frame * BATCH
    batch_msgspec = enc.encode([plain] * BATCH)
    list_dec = msgspec.msgpack.Decoder(list[Validated])
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
        ),
        Case(
            "decode, no re-sanitize",
            ("omni decode(sanitize=False)", lambda: decode(frame, sanitize=False)),
            {"msgspec decode+validate": lambda: valid_dec.decode(msgspec_frame)},
            {"msgspec decode+validate": 0.6},
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
            {},
            per_item=BATCH,
        ),
    ]


@contextlib.contextmanager
def shm_case() -> Iterator[Case]:
    """Decoding straight from a `SharedMemory.buf` view, for both codecs; the segment is removed on exit."""
    shm = shared_memory.SharedMemory(create=True, size=4096)
    views: list[memoryview] = []
    try:
        fields = RECORD.to_dict()
        msgspec_frame = msgspec.msgpack.encode(Plain(**{k: fields[k] for k in Plain.__struct_fields__}))
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
        )
    finally:
        for view in views:
            view.release()
        shm.close()
        shm.unlink()


def measure(fn: Callable[[], Any], *, repeat: int = 5) -> float:
    """Best-of-`repeat` seconds per call."""
    timer = timeit.Timer(fn)
    number, _ = timer.autorange()
    return min(timer.repeat(repeat=repeat, number=number)) / number


def table() -> tuple[str, bool]:
    """Runs every case; returns the Markdown ratio table and whether every target was met."""
    lines = [
        "| group | ours | ns/item | baseline | ns/item | ratio | target | met |",
        "|---|---|---:|---|---:|---:|---:|---|",
    ]
    all_met = True
    with shm_case() as from_shm:
        for case in [*cases(), from_shm]:
            all_met &= _rows(case, lines)
    return "\n".join(lines), all_met


def _rows(case: Case, lines: list[str]) -> bool:
    """Measures one case and appends its table rows; returns whether its targets were met."""
    all_met = True
    ours_name, ours_fn = case.ours
    ours = measure(ours_fn) / case.per_item
    for name, fn in case.baselines.items():
        base = measure(fn) / case.per_item
        ratio = ours / base
        target = case.targets.get(name)
        met = None if target is None else ratio <= target
        all_met &= met is not False
        lines.append(
            f"| {case.group} | {ours_name} | {ours * 1e9:.0f} | {name} | {base * 1e9:.0f} | {ratio:.2f}x | "
            f"{'' if target is None else f'<= {target}x'} | {'' if met is None else ('yes' if met else 'NO')} |"
        )
    if case.per_item > 1:
        lines.append(
            f"| {case.group} | {ours_name} | | records/s | {1 / ours / 1e6:.2f} M | | >= 5 M | "
            f"{'yes' if 1 / ours >= 5e6 else 'NO'} |"
        )
        all_met &= 1 / ours >= 5e6
    return all_met
