"""Process exit codes of stage workers and of the API (supervising) process, and their parsers.

Orchestrators (Kubernetes, Docker, systemd) only see the exit status, so each way a pipeline can
end has its own code. The values avoid 1 and 2 (Python's uncaught exception and usage errors) and
126-165 (the shell's "not executable" and 128+signal codes), except for the signal rows, which
follow the 128+signal convention on purpose. The tables in the docs and `omni-errors doctor` are
generated from this enum (`omni_errors.fatal.tables`).

A code is typed (`ExitCode`) everywhere inside; values from outside (a peer's frame, a child's exit
status) become one here, once, by a total parser that never raises on an error path.
"""

from __future__ import annotations

import enum
import signal

__all__ = ["ExitCode", "exit_code_for_signal", "stage_exit_code"]


class ExitCode(enum.IntEnum):
    """Documented exit codes; a worker and the API process use the same table."""

    OK = 0
    #: EngineDeadError, InductorError, or any exception escaping the engine loop.
    FATAL_ENGINE = 80
    #: torch.OutOfMemoryError (and subclasses) in a stage.
    OOM = 81
    #: A stage failed to start (engine construction raised, died, or missed the startup deadline).
    STARTUP_FAILURE = 82
    #: A channel between the supervisor and a stage broke (EOF, EPIPE, corrupt frame).
    BROKEN_IPC = 83
    #: A stage stopped answering (no heartbeat) and did not recover.
    STAGE_HUNG = 84
    #: A stage process exited or was killed without reporting a fatal error.
    STAGE_LOST = 85
    #: A remote stage's link missed its deadline: the stage was killed, its host partitioned, or
    #: the link too slow to carry a heartbeat in time.
    LINK_LOST = 86
    #: Stopped by SIGINT (128 + 2).
    SIGINT = 128 + signal.SIGINT
    #: Stopped by SIGTERM (128 + 15).
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
