"""OmniErrorDetails: construction, invariants with exact messages, value semantics, pickling."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import omni_errors as oe
import pytest
from omni_errors import InvalidRecordError, OmniErrorDetails

CLIENT: dict[str, Any] = {
    "message": "max_tokens must be <= 4096, got 10000",
    "category": "client",
    "status_code": 400,
    "error_type": "BadRequestError",
    "parameter": "max_tokens",
    "request_id": "chatcmpl-1",
}
FATAL: dict[str, Any] = {
    "message": "stage died",
    "category": "server",
    "status_code": 500,
    "error_type": "EngineDeadError",
    "stage_id": 2,
    "fatal": True,
}


def test_defaults_and_fields() -> None:
    d = OmniErrorDetails("bad", "client", 400, "BadRequestError")
    assert (d.message, d.category, d.status_code, d.error_type) == ("bad", "client", 400, "BadRequestError")
    assert (d.parameter, d.request_id, d.stage_id, d.fatal) == (None, None, None, False)


def test_keyword_construction_and_dict_round_trip() -> None:
    d = OmniErrorDetails(**FATAL)
    assert d.to_dict() == {**FATAL, "parameter": None, "request_id": None}
    assert OmniErrorDetails.from_dict(d.to_dict()) == d


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        (
            {"status_code": 500},
            "status_code",
            'field `status_code` 500 is outside 400..=499 required for category "client"',
        ),
        ({"status_code": 70000}, "status_code", "field `status_code` 70000 is outside 400..=499"),
        ({"status_code": -1}, "status_code", "field `status_code` -1 is outside 400..=499"),
        (
            {"category": "server"},
            "status_code",
            'field `status_code` 400 is outside 500..=599 required for category "server"',
        ),
        ({"category": "user"}, "category", 'field `category` must be one of "client", "server", got "user"'),
        ({"fatal": True}, "fatal", 'field `fatal` may be true only for category "server"'),
        (
            {"error_type": "Bad Request"},
            "error_type",
            r"field `error_type` must be an identifier .* got \"Bad Request\"",
        ),
        ({"error_type": "E" * 65}, "error_type", "field `error_type` length 65 exceeds limit 64"),
        ({"request_id": "r" * 257}, "request_id", "field `request_id` length 257 exceeds limit 256"),
        ({"stage_id": -1}, "stage_id", "field `stage_id` -1 is outside 0..=65534"),
        ({"stage_id": 65535}, "stage_id", "field `stage_id` 65535 is outside 0..=65534"),
    ],
)
def test_invariants_raise_with_field_limit_and_value(changes: dict[str, Any], field: str, message: str) -> None:
    with pytest.raises(InvalidRecordError, match=message) as info:
        OmniErrorDetails(**{**CLIENT, **changes})
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


def test_wrong_types_raise_type_error() -> None:
    with pytest.raises(TypeError):
        OmniErrorDetails(**{**CLIENT, "message": b"bytes"})
    with pytest.raises(TypeError):
        OmniErrorDetails(**{**CLIENT, "status_code": "400"})


def test_over_long_message_is_truncated_to_the_bound() -> None:
    d = OmniErrorDetails(**{**CLIENT, "message": "x" * 10_000})
    assert len(d.message.encode()) <= oe.MAX_MESSAGE_LEN


def test_frozen() -> None:
    d = OmniErrorDetails(**CLIENT)
    with pytest.raises(AttributeError):
        d.status_code = 404  # type: ignore[misc]


def test_equality_and_hash() -> None:
    a, b = OmniErrorDetails(**CLIENT), OmniErrorDetails(**CLIENT)
    assert a == b and hash(a) == hash(b) and len({a, b}) == 1
    assert a != a.replace(request_id="other")
    assert a != "not a record"


def test_replace_validates_and_rejects_unknown_fields() -> None:
    d = OmniErrorDetails(**CLIENT)
    assert d.replace(status_code=404).status_code == 404
    with pytest.raises(InvalidRecordError):
        d.replace(status_code=500)
    with pytest.raises(TypeError, match="unexpected field 'colour'"):
        d.replace(colour="red")


def test_from_dict_rejects_unknown_keys() -> None:
    with pytest.raises(TypeError):
        OmniErrorDetails.from_dict({**CLIENT, "traceback": "..."})


def test_repr_is_evaluable() -> None:
    d = OmniErrorDetails(**FATAL)
    assert eval(repr(d), {"OmniErrorDetails": OmniErrorDetails}) == d


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_pickle_every_protocol(protocol: int) -> None:
    d = OmniErrorDetails(**FATAL)
    assert pickle.loads(pickle.dumps(d, protocol=protocol)) == d


def test_pickle5_carries_one_out_of_band_frame() -> None:
    d = OmniErrorDetails(**CLIENT)
    buffers: list[pickle.PickleBuffer] = []
    data = pickle.dumps(d, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1
    assert bytes(buffers[0].raw()) == oe.encode(d)
    assert pickle.loads(data, buffers=buffers) == d


def test_copy_returns_equal_record() -> None:
    d = OmniErrorDetails(**CLIENT)
    assert copy.copy(d) == d and copy.deepcopy(d) == d


def test_match_args() -> None:
    match OmniErrorDetails(**FATAL):
        case OmniErrorDetails(_, "server", 500, "EngineDeadError"):
            matched = True
        case _:
            matched = False
    assert matched


def test_message_and_parameter_are_sanitized_at_construction() -> None:
    d = OmniErrorDetails(
        "worker at 0x7f3a2b1c9d40 failed reading /usr/lib/python3/dist-packages/x.py",
        "server",
        500,
        "InternalServerError",
        parameter="body.messages.0.content",
    )
    assert "0x7f3a2b1c9d40" not in d.message and "/usr/lib" not in d.message
    assert d.parameter == "messages[0].content"
    assert d == d.replace()  # sanitizing is idempotent, so a copy is equal
