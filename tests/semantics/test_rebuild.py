"""rebuild(): by category, never by status; classify(rebuild(d)) == d."""

from __future__ import annotations

import pickle
import subprocess
import sys

import omni_errors
import pytest
from hypothesis import given, settings, strategies as st
from omni_errors import InvalidRecordError, OmniErrorDetails
from omni_errors.semantics.classification import classify
from omni_errors.semantics.exceptions import OmniClientError, OmniEngineDeadError, OmniServerError, rebuild
from vllm.exceptions import VLLMClientError, VLLMServerError
from vllm.v1.engine.exceptions import EngineDeadError

_text = st.text(st.characters(codec="utf-8"), max_size=60)


@st.composite
def records(draw: st.DrawFn) -> OmniErrorDetails:
    category = draw(st.sampled_from(["client", "server"]))
    status = draw(st.integers(400, 499) if category == "client" else st.integers(500, 599))
    return OmniErrorDetails(
        draw(_text),
        category,
        status,
        draw(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,30}", fullmatch=True)),
        parameter=draw(st.none() | st.from_regex(r"[a-z_][a-z0-9_.]{0,20}", fullmatch=True)),
        request_id=draw(st.none() | st.from_regex(r"[a-z0-9-]{1,40}", fullmatch=True)),
        stage_id=draw(st.none() | st.integers(0, 65534)),
        fatal=category == "server" and draw(st.booleans()),
    )


@settings(deadline=None, max_examples=200)
@given(records())
def test_classify_rebuild_round_trip(d: OmniErrorDetails) -> None:
    exc = rebuild(d)
    assert exc.details is d
    assert classify(exc) == d
    assert classify(pickle.loads(pickle.dumps(exc))) == d


@pytest.mark.parametrize(
    ("category", "status", "fatal", "cls"),
    [
        ("client", 400, False, OmniClientError),
        ("client", 499, False, OmniClientError),
        ("server", 500, False, OmniServerError),
        ("server", 503, False, OmniServerError),
        ("server", 500, True, OmniEngineDeadError),
        ("server", 504, True, OmniEngineDeadError),
    ],
)
def test_rebuild_by_category(category: str, status: int, fatal: bool, cls: type[BaseException]) -> None:
    d = OmniErrorDetails("m", category, status, "SomeError", stage_id=3, fatal=fatal)
    exc = rebuild(d)
    assert type(exc) is cls
    assert isinstance(exc, VLLMClientError if category == "client" else VLLMServerError)
    assert isinstance(exc, EngineDeadError) == fatal
    assert getattr(exc, "stage_id", 3) == 3


def test_omni_client_error_keeps_030_signature() -> None:
    exc = OmniClientError("voice not found", status_code=404, error_type="NotFoundError")
    assert (exc.message, exc.status_code, exc.error_type) == ("voice not found", 404, "NotFoundError")
    assert exc.details == OmniErrorDetails("voice not found", "client", 404, "NotFoundError")
    assert OmniClientError("plain").details.status_code == 400
    assert OmniClientError("phrase type", error_type="Bad Request").error_type == "BadRequestError"
    with pytest.raises(VLLMClientError):
        raise exc
    # Reparented: catching only ValueError no longer catches it (docs/migration.md).
    with pytest.raises(OmniClientError):
        try:
            raise exc
        except ValueError:  # pragma: no cover - must not happen
            pytest.fail("OmniClientError is no longer a ValueError")
    with pytest.raises(InvalidRecordError):
        OmniClientError("wrong side", status_code=500)


def test_omni_server_error_twin() -> None:
    exc = OmniServerError("stage crashed", status_code=503, error_type="ServiceUnavailableError", stage_id=1)
    assert isinstance(exc, VLLMServerError)
    assert exc.details == OmniErrorDetails("stage crashed", "server", 503, "ServiceUnavailableError", stage_id=1)
    with pytest.raises(InvalidRecordError):
        OmniServerError("wrong side", status_code=404)


def test_package_attribute_is_callable_whichever_import_came_first() -> None:
    d = OmniErrorDetails("m", "server", 500, "InternalServerError")
    assert omni_errors.classify(omni_errors.rebuild(d)) == d


def test_import_omni_errors_does_not_import_torch_or_vllm() -> None:
    code = (
        "import sys, omni_errors\n"
        "omni_errors.encode(omni_errors.OmniErrorDetails('m', 'client', 400, 'BadRequestError'))\n"
        "assert 'torch' not in sys.modules and 'vllm' not in sys.modules, 'heavy import'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
