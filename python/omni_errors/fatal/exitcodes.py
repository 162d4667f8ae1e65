"""Process exit codes of stage workers and of the API (supervising) process, and their parsers.

Orchestrators (Kubernetes, Docker, systemd) only see the exit status, so each way a pipeline can
end has its own code. The values avoid 1 and 2 (Python's uncaught exception and usage errors) and
126-165 (the shell's "not executable" and 128+signal codes), except for the signal rows, which
follow the 128+signal convention on purpose. The tables in the docs and `omni-errors doctor` are
generated from `ExitCode`, `MEANINGS` and the policy's `PRECEDENCE` (`omni_errors.fatal.tables`).

A code is typed (`ExitCode`) everywhere inside; values from outside (a peer's frame, a child's exit
status) become one here, once, by a total parser that never raises on an error path.
"""

from __future__ import annotations

import enum
import signal
from collections.abc import Mapping

__all__ = ["MEANINGS", "ExitCode", "exit_code_for_signal", "stage_exit_code"]


class ExitCode(enum.IntEnum):
    """Documented exit codes; a worker and the API process use the same table (`MEANINGS` says when)."""

    OK = 0
    FATAL_ENGINE = 80
    OOM = 81
    STARTUP_FAILURE = 82
    BROKEN_IPC = 83
    STAGE_HUNG = 84
    STAGE_LOST = 85
    LINK_LOST = 86
    CANNOT_LISTEN = 87
    SIGINT = 128 + signal.SIGINT
    SIGTERM = 128 + signal.SIGTERM

    @classmethod
    def parse(cls, value: object) -> ExitCode | None:
        """The documented code `value` stands for, or None for anything else.

        Total: an unknown code (a newer release's), a bool, a string or a huge int from a peer
        gives None, never an exception, because it is read on the paths that answer failures.
        """
        if isinstance(value, cls):
            return value
        if type(value) is not int:  # not bool (an int subclass), not a float that happens to be whole
            return None
        try:
            return cls(value)
        except ValueError:
            return None


#: When a process ends with each code: the one text the docs' tables and `omni-errors doctor` print.
MEANINGS: Mapping[ExitCode, str] = {
    ExitCode.OK: "a clean stop: `shutdown()` without a signal, or a stage told to stop",
    ExitCode.FATAL_ENGINE: "a stage reported a fatal failure: `EngineDeadError`, `InductorError`, a lost executor, "
    "or any exception escaping its engine loop",
    ExitCode.OOM: "a stage ran out of device memory: `torch.OutOfMemoryError` (or a subclass) anywhere in the "
    "failure's cause chain, found by type",
    ExitCode.STARTUP_FAILURE: "a stage failed to start: its engine raised while being built, its process died, or it "
    "missed the startup deadline; a process whose configured CURVE keys cannot be used",
    ExitCode.BROKEN_IPC: "a channel between the supervisor and a stage broke (EOF or EPIPE while the peer lives, a "
    "malformed frame); a stage whose supervisor vanished",
    ExitCode.STAGE_HUNG: "a stage stopped making progress: its heartbeats stopped and did not resume within their "
    "grace period, or a step of its engine ran past its step deadline (`OMNI_ERRORS_STEP_DEADLINE_S`)",
    ExitCode.STAGE_LOST: "a stage (its only replica) exited or was killed without reporting: SIGKILL, a segfault, "
    "the kernel's OOM killer",
    ExitCode.LINK_LOST: "a remote stage's link missed its deadline (the stage killed, its host cut off, the link too "
    "slow) and no replica took its place in time; a remote stage whose head is gone or cut off",
    ExitCode.CANNOT_LISTEN: "the API process could not listen on its address (the port taken, the address not this "
    "host's, a port below 1024 without the right): said in one line before any stage starts",
    ExitCode.SIGINT: "stopped by SIGINT (Ctrl+C: 128 + 2)",
    ExitCode.SIGTERM: "stopped by SIGTERM (128 + 15), after draining",
}


def exit_code_for_signal(signum: int) -> ExitCode:
    """The 128+signal code of a signal the lifecycle stops on (SIGINT -> 130, SIGTERM -> 143).

    Raises ValueError for any other signal: the lifecycle installs handlers for these two only.
    """
    return ExitCode(128 + int(signum))


def stage_exit_code(child_code: object) -> ExitCode:
    """The pipeline's exit code for a stage that ended with `child_code`: the stage's own code
    when it is a documented failure, else STAGE_LOST (killed by a signal, or an unknown code)."""
    code = ExitCode.parse(child_code)
    return code if code is not None and code is not ExitCode.OK else ExitCode.STAGE_LOST
