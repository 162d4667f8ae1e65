"""The frame codec from Python: every buffer kind, encode_into, peek, decode_many, malformed input."""

from __future__ import annotations

import array
import mmap
from typing import Any

import omni_errors as oe
import pytest
from omni_errors import DecodeError, EncodeError, OmniErrorDetails
from reference_decoder import encode as reference_encode

RECORD = OmniErrorDetails(
    "stage 1 failed", "server", 500, "EngineDeadError", request_id="req-9", stage_id=1, fatal=True
)
FRAME = oe.encode(RECORD)


def test_round_trip_and_length() -> None:
    assert oe.decode(FRAME) == RECORD
    assert RECORD.to_frame() == FRAME
    assert len(FRAME) == 16 + 2 + 14 + 2 + 15 + 2 + 5 + 4


@pytest.mark.parametrize(
    "wrap",
    [bytes, bytearray, memoryview, lambda b: memoryview(bytearray(b)), lambda b: array.array("B", b)],
    ids=["bytes", "bytearray", "memoryview", "memoryview-rw", "array"],
)
def test_decode_any_buffer(wrap: Any) -> None:
    assert oe.decode(wrap(FRAME)) == RECORD


def test_decode_from_mmap() -> None:
    with mmap.mmap(-1, len(FRAME)) as m:
        m.write(FRAME)
        assert oe.decode(m) == RECORD


def test_decode_rejects_non_contiguous_and_non_buffers() -> None:
    with pytest.raises(DecodeError, match="not C-contiguous"):
        oe.decode(memoryview(FRAME + FRAME)[::2])
    with pytest.raises(DecodeError, match="buffer protocol"):
        oe.decode("a str")  # type: ignore[arg-type]


@pytest.mark.parametrize("cut", range(len(FRAME)))
def test_truncation_at_every_offset(cut: int) -> None:
    expected = (
        f"truncated frame: field `header` needs 16 bytes at byte 0, {cut} available"
        if cut < 16
        else f"truncated frame: field `frame` needs {len(FRAME)} bytes at byte 0, {cut} available"
    )
    with pytest.raises(DecodeError) as info:
        oe.decode(FRAME[:cut])
    assert str(info.value) == expected
    assert info.value.offset == 0


def test_corruption_of_every_byte_is_detected() -> None:
    for i in range(len(FRAME)):
        broken = bytearray(FRAME)
        broken[i] ^= 0x41
        with pytest.raises(DecodeError):
            oe.decode(broken)


@pytest.mark.parametrize(
    ("frame", "message"),
    [
        (b"PK" + FRAME[2:], "field `magic` expected 0x4f45, got 0x504b at byte 0"),
        (
            FRAME[:2] + b"\x07" + FRAME[3:],
            "field `major_version` 7 is not supported \\(this reader speaks 1\\) at byte 2",
        ),
        (FRAME[:-1] + b"\x00", "field `checksum` 0x.* does not match computed 0x.* at byte 56: frame is torn"),
        (FRAME + b"\x00\x00", "field `frame_len` 60 leaves trailing bytes: buffer has 62 \\(at byte 60\\)"),
    ],
    ids=["bad-magic", "major-7", "checksum", "trailing"],
)
def test_malformed_frames_exact_errors(frame: bytes, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        oe.decode(frame)


@pytest.mark.parametrize(
    ("record", "message", "offset"),
    [
        (
            {"status_code": 503, "category": "client"},
            'field `status_code` 503 is outside 400..=499 required for category "client" at byte 8',
            8,
        ),
        (
            {"status_code": 400, "category": "client", "fatal": True},
            'field `fatal` may be true only for category "server" at byte 10',
            10,
        ),
        (
            {"status_code": 500, "category": "server", "error_type": "not an identifier"},
            "field `error_type` must be an identifier",
            19,
        ),
        (
            {"status_code": 500, "category": "server", "request_id": "r" * 300},
            "field `request_id` length 300 exceeds limit 256",
            24,
        ),
        (
            {"status_code": 500, "category": "server", "stage_id": 65535},
            "field `stage_id` 65535 is outside 0..=65534 at byte 12",
            12,
        ),
    ],
    ids=["category-status", "fatal-client", "identifier", "over-limit", "stage-range"],
)
def test_invalid_records_in_well_formed_frames(record: dict[str, Any], message: str, offset: int) -> None:
    frame = reference_encode({"message": "m", "error_type": "Err", **record})
    with pytest.raises(DecodeError, match=message) as info:
        oe.decode(frame)
    assert info.value.offset == offset


def test_invalid_utf8_names_the_byte() -> None:
    frame = reference_encode({"message": "ok", "error_type": "Err", "category": "client", "status_code": 400})
    broken = bytearray(frame[:-4])
    broken[19] = 0xC3  # a lead byte followed by nothing valid
    from reference_decoder import reseal

    with pytest.raises(DecodeError, match="field `message` is not valid UTF-8 at byte 19"):
        oe.decode(reseal(bytes(broken)))


def test_decode_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        oe.decode(b"")


def test_encode_into_offset_and_exact_size() -> None:
    buf = bytearray(100)
    written = oe.encode_into(RECORD, buf, 7)
    assert written == len(FRAME)
    assert bytes(buf[7 : 7 + written]) == FRAME
    assert buf[:7] == bytearray(7) and buf[7 + written :] == bytearray(100 - 7 - written)
    exact = bytearray(len(FRAME))
    assert oe.encode_into(RECORD, exact) == len(FRAME)


def test_encode_into_refuses_bad_destinations() -> None:
    with pytest.raises(
        EncodeError, match=f"buffer too small: frame needs {len(FRAME)} bytes at offset 40, 10 available"
    ):
        oe.encode_into(RECORD, bytearray(50), 40)
    with pytest.raises(EncodeError, match="at offset 99, 0 available"):
        oe.encode_into(RECORD, bytearray(50), 99)
    with pytest.raises(EncodeError, match="read-only"):
        oe.encode_into(RECORD, bytes(100))
    with pytest.raises(OverflowError):
        oe.encode_into(RECORD, bytearray(100), -1)


def test_peek_reads_the_header_only() -> None:
    assert oe.peek(FRAME) == ("server", True, 500, 1, len(FRAME), oe.RULE_SET)
    client = oe.encode(OmniErrorDetails("x", "client", 404, "NotFoundError"))
    assert oe.peek(client) == ("client", False, 404, None, len(client), oe.RULE_SET)
    # peek trusts the header: a corrupted string is only caught by decode.
    corrupted = bytearray(FRAME)
    corrupted[20] ^= 1
    assert oe.peek(corrupted) == ("server", True, 500, 1, len(FRAME), oe.RULE_SET)
    with pytest.raises(DecodeError, match="checksum"):
        oe.decode(corrupted)


def test_peek_is_a_named_tuple_whose_frame_len_walks_a_batch() -> None:
    head = oe.peek(FRAME)
    assert isinstance(head, oe.Peek) and isinstance(head, tuple)
    assert (head.category, head.fatal, head.status_code, head.stage_id) == ("server", True, 500, 1)
    assert (head.frame_len, head.rule_set) == (len(FRAME), oe.RULE_SET)
    assert repr(head).startswith("omni_errors.Peek(category='server', fatal=True, status_code=500")
    batch = memoryview(FRAME + oe.encode(RECORD.replace(stage_id=2)))
    second = oe.peek(batch[oe.peek(batch).frame_len :])
    assert second.stage_id == 2


def test_peek_refuses_truncated_and_foreign_headers() -> None:
    with pytest.raises(DecodeError, match="field `header` needs 16 bytes"):
        oe.peek(FRAME[:8])
    with pytest.raises(DecodeError, match="field `magic`"):
        oe.peek(b"\x00" * 32)
    with pytest.raises(DecodeError, match="field `frame`"):
        oe.peek(FRAME[:30])


def test_decode_many_back_to_back() -> None:
    others = [RECORD.replace(request_id=f"req-{i}") for i in range(5)]
    packed = b"".join(oe.encode(d) for d in others)
    assert oe.decode_many(packed) == others
    assert oe.decode_many(memoryview(bytearray(packed))) == others
    assert oe.decode_many(b"") == []


def test_decode_many_reports_absolute_offset() -> None:
    first = oe.encode(RECORD)
    packed = first + b"XX" + FRAME[2:]
    with pytest.raises(DecodeError, match=f"at byte {len(first)}") as info:
        oe.decode_many(packed)
    assert info.value.offset == len(first)
    with pytest.raises(DecodeError, match="field `header`"):
        oe.decode_many(FRAME + FRAME[:5])


def test_decoded_records_keep_their_frame_and_make_strings_when_read() -> None:
    record = oe.decode(bytearray(FRAME))
    assert record.message is record.message
    assert record == RECORD and hash(record) == hash(RECORD)
    assert oe.encode(record) == FRAME
    many = oe.decode_many(FRAME * 3)
    assert [r.request_id for r in many] == ["req-9"] * 3


def test_decode_without_sanitizing_keeps_peer_text() -> None:
    frame = reference_encode({"message": "m" * 50, "error_type": "Err", "category": "client", "status_code": 400})
    assert oe.decode(frame, sanitize=False).message == "m" * 50


def test_decode_re_sanitizes_peer_text_unless_told_not_to() -> None:
    leaky = "cannot open /home/alice/.cache/weights.bin: api_key=sk-live-0123456789abcdefghijklmnop"
    frame = reference_encode(
        {"message": leaky, "error_type": "Err", "category": "server", "status_code": 500, "parameter": "/etc/passwd"}
    )
    cleaned = oe.decode(frame)
    assert "/home/alice" not in cleaned.message and "sk-live" not in cleaned.message
    assert cleaned.message == oe.sanitize(leaky)
    assert cleaned.parameter is not None and "/etc/passwd" not in cleaned.parameter
    assert oe.decode(frame, sanitize=False).message == leaky
    assert oe.decode_many(frame * 2)[1] == cleaned
