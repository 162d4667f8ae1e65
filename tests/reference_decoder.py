"""An independent decoder for frame 1.x, written from docs/wire-format.md (tests only).

It shares no code with the Rust decoder, so agreement between the two checks the specification
as much as either implementation. It returns a plain dict (and the header's rule set), or raises
`ReferenceDecodeError`.
"""

from __future__ import annotations

import re
import struct
from typing import Any

HEADER = struct.Struct("<2sBBIHBBHH")  # magic, major, minor, frame_len, status, flags, reserved, stage, rule_set
LIMITS = {"message": 4096, "error_type": 64, "parameter": 128, "request_id": 256}
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ReferenceDecodeError(ValueError):
    pass


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def decode(buf: bytes) -> dict[str, Any]:
    """The record of the one frame filling `buf`."""
    return decode_frame(buf)[0]


def decode_frame(buf: bytes) -> tuple[dict[str, Any], int]:
    """The record of the one frame filling `buf`, and the sanitizer rule set its header records."""
    if len(buf) < 16:
        raise ReferenceDecodeError("truncated header")
    magic, major, _minor, frame_len, status, flags, res8, stage, rule_set = HEADER.unpack_from(buf)
    if magic != b"OE":
        raise ReferenceDecodeError("bad magic")
    if major != 1:
        raise ReferenceDecodeError("unsupported major version")
    if not 24 <= frame_len <= 65536:
        raise ReferenceDecodeError("bad frame length")
    if flags & 0xE0 or res8:
        raise ReferenceDecodeError("reserved bits")
    if not flags & 0x04 and stage:
        raise ReferenceDecodeError("stage id without flag")
    if len(buf) < frame_len:
        raise ReferenceDecodeError("truncated frame")
    if len(buf) > frame_len:
        raise ReferenceDecodeError("trailing bytes")
    body_end = frame_len - 4
    if crc32c(buf[:body_end]) != struct.unpack_from("<I", buf, body_end)[0]:
        raise ReferenceDecodeError("checksum")
    pos = 16

    def take(n: int) -> bytes:
        nonlocal pos
        if pos + n > body_end:
            raise ReferenceDecodeError("field overruns frame")
        out = buf[pos : pos + n]
        pos += n
        return out

    def string(name: str) -> str:
        (n,) = struct.unpack("<H", take(2))
        if n > LIMITS[name]:
            raise ReferenceDecodeError(f"{name} too long")
        try:
            return take(n).decode("utf-8")
        except UnicodeDecodeError:
            raise ReferenceDecodeError(f"{name} not UTF-8") from None

    record: dict[str, Any] = {
        "message": string("message"),
        "category": "server" if flags & 0x01 else "client",
        "status_code": status,
        "error_type": string("error_type"),
        "parameter": string("parameter") if flags & 0x08 else None,
        "request_id": string("request_id") if flags & 0x10 else None,
        "stage_id": stage if flags & 0x04 else None,
        "fatal": bool(flags & 0x02),
    }
    while pos < body_end:
        _tag, n = struct.unpack("<HH", take(4))
        take(n)
    low = 500 if record["category"] == "server" else 400
    if not low <= status <= low + 99:
        raise ReferenceDecodeError("status outside category range")
    if record["fatal"] and record["category"] == "client":
        raise ReferenceDecodeError("fatal client")
    if not IDENTIFIER.match(record["error_type"]):
        raise ReferenceDecodeError("error_type not an identifier")
    if record["stage_id"] is not None and record["stage_id"] > 65534:
        raise ReferenceDecodeError("stage id out of range")
    return record, rule_set


def encode_extension(frame: bytes, tag: int, value: bytes) -> bytes:
    """Appends an extension field to `frame` and re-seals it (tests of forward compatibility)."""
    body = bytearray(frame[:-4])
    body += struct.pack("<HH", tag, len(value)) + value
    struct.pack_into("<I", body, 4, len(body) + 4)
    return bytes(body) + struct.pack("<I", crc32c(bytes(body)))


def reseal(body: bytes) -> bytes:
    """`body` (a frame without its checksum) with a correct checksum appended."""
    return body + struct.pack("<I", crc32c(body))


def encode(record: dict[str, Any], *, rule_set: int = 0, minor: int = 1) -> bytes:
    """Encodes a record dict exactly as the specification says, with no validation or sanitizing.

    `rule_set` is what the header claims about the text (0: not recorded, as a 1.0 writer or a
    foreign encoder writes). Tests use it to build frames the Rust encoder refuses to write (raw
    secrets, bad invariants, a false claim of having been sanitized, older rule sets), and frames
    of another minor version (`minor`: a peer older or newer than this library).
    """
    flags = (
        (0x01 if record["category"] == "server" else 0)
        | (0x02 if record.get("fatal") else 0)
        | (0x04 if record.get("stage_id") is not None else 0)
        | (0x08 if record.get("parameter") is not None else 0)
        | (0x10 if record.get("request_id") is not None else 0)
    )
    body = bytearray()
    for name in ("message", "error_type", "parameter", "request_id"):
        value = record.get(name)
        if value is not None:
            raw = value.encode("utf-8")
            body += struct.pack("<H", len(raw)) + raw
    frame_len = 16 + len(body) + 4
    header = HEADER.pack(
        b"OE", 1, minor, frame_len, record["status_code"], flags, 0, record.get("stage_id") or 0, rule_set
    )
    return reseal(header + bytes(body))
