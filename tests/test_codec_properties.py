"""Property tests: round trips over every field combination, arbitrary bytes, reference agreement."""

from __future__ import annotations

from typing import Any

import omni_errors as oe
from hypothesis import example, given, settings, strategies as st
from omni_errors import DecodeError, OmniErrorDetails
from reference_decoder import ReferenceDecodeError, decode as reference_decode, reseal

identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,63}", fullmatch=True)
short_text = st.text(max_size=200)


@st.composite
def records(draw: st.DrawFn) -> OmniErrorDetails:
    category = draw(st.sampled_from(["client", "server"]))
    low = 400 if category == "client" else 500
    return OmniErrorDetails(
        message=draw(short_text),
        category=category,
        status_code=draw(st.integers(low, low + 99)),
        error_type=draw(identifiers),
        parameter=draw(st.none() | st.text(max_size=40)),
        request_id=draw(st.none() | st.text(max_size=60)),
        stage_id=draw(st.none() | st.integers(0, oe.MAX_STAGE_ID)),
        fatal=category == "server" and draw(st.booleans()),
    )


@given(records())
def test_round_trip(record: OmniErrorDetails) -> None:
    frame = oe.encode(record)
    assert oe.decode(frame) == record
    assert oe.decode(frame, sanitize=False) == record
    assert oe.peek(frame) == (
        record.category,
        record.fatal,
        record.status_code,
        record.stage_id,
        len(frame),
        oe.RULE_SET,
    )
    assert oe.decode_many(frame * 3) == [record] * 3


@given(records())
def test_reference_decoder_agrees_on_valid_frames(record: OmniErrorDetails) -> None:
    assert reference_decode(oe.encode(record)) == record.to_dict()


@settings(max_examples=300)
@given(st.binary(max_size=400))
@example(b"OE\x01\x00\x18\x00\x00\x00")
def test_arbitrary_bytes_raise_only_decode_error(data: bytes) -> None:
    for fn in (oe.decode, oe.decode_many, oe.peek):
        try:
            fn(data)
        except DecodeError:
            pass


def _outcome(fn: Any, frame: bytes) -> Any:
    try:
        result = fn(frame)
    except (DecodeError, ReferenceDecodeError):
        return "error"
    return result if isinstance(result, dict) else result.to_dict()


@settings(max_examples=300)
@given(records(), st.data())
def test_reference_decoder_agrees_on_mutated_frames(record: OmniErrorDetails, data: st.DataObject) -> None:
    frame = bytearray(oe.encode(record))
    for _ in range(data.draw(st.integers(1, 3))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):  # a valid checksum lets the structural checks do the rejecting
        frame = bytearray(reseal(bytes(frame[:-4])))
    rust = _outcome(lambda b: oe.decode(b, sanitize=False), bytes(frame))
    assert rust == _outcome(reference_decode, bytes(frame))
