"""The committed hex vectors: the Rust codec, the reference decoder and the generator agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import omni_errors as oe
import pytest
from reference_decoder import ReferenceDecodeError, decode as reference_decode, decode_frame, encode as reference_encode
from vectors.generate import build

VECTORS: dict[str, Any] = json.loads(Path(__file__).with_name("vectors").joinpath("frames.json").read_text("utf-8"))


def test_committed_vectors_match_the_generator() -> None:
    assert build() == VECTORS


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=lambda v: v["name"])
def test_valid_vector(vector: dict[str, Any]) -> None:
    frame = bytes.fromhex(vector["hex"])
    assert oe.decode(frame).to_dict() == vector["record"]
    assert oe.decode(frame, sanitize=False).rule_set == oe.peek(frame).rule_set == vector["rule_set"]
    assert decode_frame(frame) == (vector["record"], vector["rule_set"])


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=lambda v: v["name"])
def test_the_encoder_writes_what_the_specification_says(vector: dict[str, Any]) -> None:
    record = oe.OmniErrorDetails(**vector["record"])
    assert oe.encode(record) == reference_encode(vector["record"], rule_set=oe.RULE_SET)


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vector(vector: dict[str, Any]) -> None:
    frame = bytes.fromhex(vector["hex"])
    with pytest.raises(oe.DecodeError) as info:
        oe.decode(frame)
    assert (info.value.field, info.value.offset) == (vector["field"], vector["offset"])
    with pytest.raises(ReferenceDecodeError):
        reference_decode(frame)
