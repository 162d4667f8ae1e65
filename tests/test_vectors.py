"""The committed hex vectors: the Rust codec, the reference decoder and the generator agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import omni_errors as oe
import pytest
from reference_decoder import ReferenceDecodeError
from reference_decoder import decode as reference_decode
from vectors.generate import build

VECTORS: dict[str, Any] = json.loads(Path(__file__).with_name("vectors").joinpath("frames.json").read_text("utf-8"))


def test_committed_vectors_match_the_generator() -> None:
    assert build() == VECTORS


@pytest.mark.parametrize("vector", VECTORS["valid"], ids=lambda v: v["name"])
def test_valid_vector(vector: dict[str, Any]) -> None:
    frame = bytes.fromhex(vector["hex"])
    assert oe.decode(frame).to_dict() == vector["record"]
    assert reference_decode(frame) == vector["record"]
    if vector["name"] != "unknown_extension_skipped":
        assert oe.encode(oe.OmniErrorDetails(**vector["record"])) == frame


@pytest.mark.parametrize("vector", VECTORS["invalid"], ids=lambda v: v["name"])
def test_invalid_vector(vector: dict[str, Any]) -> None:
    frame = bytes.fromhex(vector["hex"])
    with pytest.raises(oe.DecodeError) as info:
        oe.decode(frame)
    assert (info.value.field, info.value.offset) == (vector["field"], vector["offset"])
    with pytest.raises(ReferenceDecodeError):
        reference_decode(frame)
