"""Exit codes parsed once at each edge: a value from outside is a documented code or nothing."""

from __future__ import annotations

import signal

import pytest
from omni_errors.fatal.exitcodes import ExitCode, exit_code_for_signal, stage_exit_code


@pytest.mark.parametrize("code", list(ExitCode))
def test_every_documented_code_parses_as_itself(code: ExitCode) -> None:
    assert ExitCode.parse(int(code)) is code
    assert ExitCode.parse(code) is code


@pytest.mark.parametrize(
    "value",
    [88, 1, -1, True, False, "81", b"\x51", 81.0, None, 2**64 - 1, 10**100, [81], {"code": 81}],
    ids=repr,
)
def test_anything_else_is_none_never_an_exception(value: object) -> None:
    assert ExitCode.parse(value) is None


def test_a_child_that_ended_without_a_documented_failure_is_lost() -> None:
    assert stage_exit_code(81) is ExitCode.OOM
    assert stage_exit_code(0) is ExitCode.STAGE_LOST  # exited "cleanly" while it should be serving
    assert stage_exit_code(-signal.SIGKILL) is ExitCode.STAGE_LOST
    assert stage_exit_code(None) is ExitCode.STAGE_LOST
    assert stage_exit_code(True) is ExitCode.STAGE_LOST


def test_the_signal_codes() -> None:
    assert exit_code_for_signal(signal.SIGINT) is ExitCode.SIGINT
    assert exit_code_for_signal(signal.SIGTERM) is ExitCode.SIGTERM
    with pytest.raises(ValueError):
        exit_code_for_signal(signal.SIGHUP)  # not a signal the lifecycle stops on
