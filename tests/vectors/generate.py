"""Writes frames.json: valid and invalid frame vectors for docs/wire-format.md.

The frames are written by the reference encoder (from the specification, not the Rust code), with
fixed header values, so they do not change with the build; tests/test_vectors.py checks that the
Rust encoder writes the same bytes. Run `python tests/vectors/generate.py` after a deliberate
format change; the test fails when the committed file and this script disagree.
"""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from omni_errors import OmniErrorDetails
from reference_decoder import encode, encode_extension, reseal

# The rule set the vectors claim cleaned their text (any value is valid; 0 means not recorded).
RULE_SET = 2

VALID: list[tuple[str, dict[str, Any]]] = [
    ("minimal_client", {"message": "", "category": "client", "status_code": 400, "error_type": "BadRequestError"}),
    (
        "validation_with_parameter",
        {
            "message": "max_tokens must be <= 4096, got 10000",
            "category": "client",
            "status_code": 400,
            "error_type": "BadRequestError",
            "parameter": "max_tokens",
            "request_id": "chatcmpl-42",
        },
    ),
    (
        "fatal_stage",
        {
            "message": "EngineCore encountered an issue. See stack trace (above) for the root cause.",
            "category": "server",
            "status_code": 500,
            "error_type": "EngineDeadError",
            "request_id": "req-7",
            "stage_id": 1,
            "fatal": True,
        },
    ),
    (
        "timeout_stage_max",
        {
            "message": "stage deadline expired",
            "category": "server",
            "status_code": 504,
            "error_type": "GatewayTimeout",
            "stage_id": 65534,
        },
    ),
    (
        "unicode_message",
        {
            "message": "Ungültige Eingabe: 音声が長すぎます 🎧",
            "category": "client",
            "status_code": 422,
            "error_type": "UnprocessableEntityError",
        },
    ),
    (
        "not_found",
        {
            "message": "The model `tiny` does not exist.",
            "category": "client",
            "status_code": 404,
            "error_type": "NotFoundError",
            "parameter": "model",
        },
    ),
]


def _frame(record: dict[str, Any], *, rule_set: int = RULE_SET, minor: int = 1) -> bytes:
    return encode(OmniErrorDetails(**record).to_dict(), rule_set=rule_set, minor=minor)


def _mutate(frame: bytes, offset: int, value: bytes, *, seal: bool) -> bytes:
    out = bytearray(frame)
    out[offset : offset + len(value)] = value
    return reseal(bytes(out[:-4])) if seal else bytes(out)


def build() -> dict[str, Any]:
    base = _frame(dict(VALID[1][1]))
    invalid: list[tuple[str, bytes, str, int]] = [
        ("empty", b"", "header", 0),
        ("short_header", base[:15], "header", 0),
        ("bad_magic", b"XE" + base[2:], "magic", 0),
        ("major_2", _mutate(base, 2, b"\x02", seal=True), "major_version", 2),
        ("frame_len_too_small", _mutate(base, 4, struct.pack("<I", 10), seal=False), "frame_len", 4),
        ("truncated_body", base[:-1], "frame", 0),
        ("bad_checksum", base[:-1] + bytes([base[-1] ^ 0xFF]), "checksum", len(base) - 4),
        ("flipped_message_byte", _mutate(base, 18, b"M", seal=False), "checksum", len(base) - 4),
        ("reserved_flag", _mutate(base, 10, b"\x20", seal=True), "flags", 10),
        ("client_status_500", _mutate(base, 8, struct.pack("<H", 500), seal=True), "status_code", 8),
        ("fatal_client", _mutate(base, 10, bytes([base[10] | 0x02]), seal=True), "fatal", 10),
        ("stage_id_without_flag", _mutate(base, 12, b"\x01", seal=True), "stage_id", 12),
        ("trailing_bytes", base + b"\x00", "frame_len", len(base)),
        ("invalid_utf8", _mutate(base, 18, b"\xff", seal=True), "message", 18),
        ("message_len_over_frame", _mutate(base, 16, struct.pack("<H", 4000), seal=True), "message", 16),
        ("message_len_over_limit", _mutate(base, 16, struct.pack("<H", 4097), seal=True), "message", 16),
        ("reserved_byte", _mutate(base, 11, b"\x01", seal=True), "reserved", 11),
        # A rule set changed after the frame was sealed is caught like any other edit.
        ("rule_set_changed_unsealed", _mutate(base, 14, struct.pack("<H", 1), seal=False), "checksum", len(base) - 4),
    ]
    record = OmniErrorDetails(**VALID[1][1]).to_dict()

    def vector(name: str, record: dict[str, Any], frame: bytes, rule_set: int = RULE_SET) -> dict[str, Any]:
        return {"name": name, "record": record, "rule_set": rule_set, "hex": frame.hex()}

    return {
        "format": "omni-errors frame 1.1",
        "valid": [vector(n, OmniErrorDetails(**r).to_dict(), _frame(r)) for n, r in VALID]
        + [
            vector("unknown_extension_skipped", record, encode_extension(base, 0x7A01, b"future field")),
            vector("frame_1_0_no_rule_set", record, _frame(VALID[1][1], rule_set=0, minor=0), rule_set=0),
            vector("older_rule_set", record, _frame(VALID[1][1], rule_set=1), rule_set=1),
            vector("future_minor", record, _frame(VALID[1][1], minor=9)),
        ],
        "invalid": [{"name": n, "hex": b.hex(), "field": f, "offset": o} for n, b, f, o in invalid],
    }


if __name__ == "__main__":
    path = Path(__file__).with_name("frames.json")
    path.write_text(json.dumps(build(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {path}")
