"""The process's fatal state: what a fatal record answered to a client does to the process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from omni_errors import OmniErrorDetails
from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import DEAD_MESSAGE

_FATAL = OmniErrorDetails(DEAD_MESSAGE, "server", 500, "InternalServerError", fatal=True, stage_id=1)


@pytest.fixture(autouse=True)
def _fresh_state() -> Iterator[None]:
    fatal.reset()
    yield
    fatal.reset()


def test_a_fatal_record_answered_to_a_client_ends_the_process() -> None:
    stops: list[OmniErrorDetails] = []
    fatal.on_fatal(stops.append)
    fatal.answered(_FATAL)
    assert fatal.exit_code() is ExitCode.FATAL_ENGINE
    assert [record.stage_id for record in stops] == [1]


def test_the_process_s_own_decision_stands_when_its_record_is_answered() -> None:
    fatal.declare(_FATAL, ExitCode.STAGE_LOST)
    fatal.answered(_FATAL)
    assert fatal.exit_code() is ExitCode.STAGE_LOST


def test_where_stages_decide_an_answered_record_ends_nothing_until_reset() -> None:
    assert not fatal.stages_decide()
    fatal.defer_to_stages()
    assert fatal.stages_decide()
    fatal.answered(_FATAL)
    assert (fatal.declared(), fatal.exit_code()) == (None, None)
    fatal.reset()
    assert not fatal.stages_decide()
    fatal.answered(_FATAL)
    assert fatal.exit_code() is ExitCode.FATAL_ENGINE


def test_ending_the_pipeline_declares_once_and_answers_each_request_with_the_canonical_record() -> None:
    stops: list[OmniErrorDetails] = []
    fatal.on_fatal(stops.append)
    client_failure = OmniErrorDetails("height must be a multiple of 16", "client", 400, "BadRequestError", stage_id=1)
    answers = fatal.end_pipeline(client_failure, ExitCode.STAGE_LOST, ["r1", "r2"])
    assert answers is not None
    assert [(a.request_id, a.stage_id, a.fatal, a.status_code) for a in answers] == [
        ("r1", 1, True, 500),
        ("r2", 1, True, 500),
    ]
    assert answers[0].message == DEAD_MESSAGE  # a client's words never answer a dead pipeline
    assert fatal.exit_code() is ExitCode.STAGE_LOST and len(stops) == 1
    # The pipeline has ended: a later failure answers nothing and changes neither record nor code.
    assert fatal.end_pipeline(_FATAL, ExitCode.OOM, ["r3"]) is None
    assert fatal.exit_code() is ExitCode.STAGE_LOST and len(stops) == 1
