"""The one fatal policy: which exit code wins, and the canonical record every request gets."""

from __future__ import annotations

import pytest
from omni_errors import OmniErrorDetails
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.fatal.policy import PRECEDENCE, FatalState, canonical_fatal
from omni_errors.semantics.core_table import DEAD_MESSAGE, fatal_record

_OOM = OmniErrorDetails(DEAD_MESSAGE, "server", 500, "InternalServerError", fatal=True, stage_id=1)
_RAW = OmniErrorDetails("worker 3 died: /opt/model.bin", "server", 500, "InternalServerError", stage_id=2)


def test_the_first_record_is_kept_and_the_code_of_highest_precedence_wins() -> None:
    state = FatalState()
    assert state.declare(_RAW, ExitCode.STAGE_LOST) is True
    assert state.declare(_OOM, ExitCode.FATAL_ENGINE) is False
    assert state.exit_code is ExitCode.FATAL_ENGINE  # a reported failure over a vanished stage
    assert state.note(ExitCode.OOM) is ExitCode.OOM  # the cause over its consequence
    assert state.note(ExitCode.STAGE_LOST) is ExitCode.OOM  # never downgraded
    assert state.record == fatal_record(stage_id=2)  # the first failure, in canonical form


@pytest.mark.parametrize(("first", "later"), [(a, b) for i, a in enumerate(PRECEDENCE) for b in PRECEDENCE[i + 1 :]])
def test_the_order_is_the_documented_one_whichever_comes_first(first: ExitCode, later: ExitCode) -> None:
    for seen in ((first, later), (later, first)):
        state = FatalState()
        for code in seen:
            state.note(code)
        assert state.exit_code is first


def test_a_note_before_the_death_is_kept_for_it() -> None:
    state = FatalState()
    state.note(ExitCode.OOM)  # a worker's OOM, seen before the pipeline ends
    state.declare(_OOM, ExitCode.FATAL_ENGINE)
    assert state.exit_code is ExitCode.OOM


def test_a_startup_failure_is_reported_as_such_with_its_root_cause() -> None:
    state = FatalState()
    state.declare(_RAW, ExitCode.OOM, starting=True)
    assert state.exit_code is ExitCode.STARTUP_FAILURE
    assert state.record is not None and state.record.message == _RAW.message  # no client reads it
    assert state.record.fatal


def test_the_canonical_record() -> None:
    assert canonical_fatal(_OOM) is _OOM  # already a fatal server record: kept (its stage too)
    assert canonical_fatal(_RAW) == fatal_record(stage_id=2)  # the public text, never the raw one
    assert canonical_fatal(_RAW, starting=True).message == _RAW.message


def test_reset_forgets() -> None:
    state = FatalState()
    state.declare(_OOM, ExitCode.OOM)
    state.reset()
    assert state.record is None and state.exit_code is None
