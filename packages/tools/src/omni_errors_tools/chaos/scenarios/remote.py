"""The reference pipeline with its last stage on a second host (target `pipeline`, same table).

Each run starts `omni_errors_tools.chaos.twohost`: `serve --remote-stage code2wav` and `omni-errors stage
code2wav` on loopback, joined over the CURVE link through a relay that can hold or delay it.
Faults are `serve`'s own (they travel to the remote stage when it joins) or the relay's.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.chaos.scenario import Scenario, expect
from omni_errors_tools.chaos.scenarios.pipeline import serve_listener, streams
from omni_errors_tools.chaos.target import Launch, ServerCommand

__all__ = ["SCENARIOS", "TWO_HOSTS", "TwoHostTarget"]

REMOTE = 2  # code2wav


@dataclass(frozen=True)
class TwoHostTarget:
    """`serve` with code2wav joining from a second host over the link (a relay in between)."""

    name: str = "pipeline"  # the same server, so the same run, table and plot as the local scenarios
    health_path: str = "/health"

    def command(self, launch: Launch) -> ServerCommand:
        relay, serve = _split(launch.args)
        listen, fds = serve_listener(launch)
        return ServerCommand(
            [launch.python, "-m", "omni_errors_tools.chaos.twohost", "--python", launch.python,
             *(f"--pass-fd={fd}" for fd in fds), "--fault-marker", str(launch.fault_marker), *relay, "--", *listen,
             "--step-interval", str(launch.step_interval), "--startup-timeout", str(launch.startup_timeout), *serve],
            pass_fds=fds,
        )  # fmt: skip


def _split(args: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """A scenario's arguments: the relay's, then `--`, then serve's."""
    if "--" not in args:
        return [], list(args)
    i = args.index("--")
    return list(args[:i]), list(args[i + 1 :])


TWO_HOSTS = TwoHostTarget()
# A request in flight at code2wav when it is lost gets the canonical fatal 500; one that finishes
# the talker meanwhile finds code2wav unreachable: 503 (it was never handed over).
_LOST = expect(("ok", 200, None), ("error", 500, REMOTE), ("error", 503, REMOTE))

SCENARIOS = [
    Scenario(
        "remote-sigkill",
        "SIGKILL of the remote code2wav (second host) mid-load: lost by the link deadline",
        TWO_HOSTS,
        lambda c: ["--", "--fault", "sigkill", "--fault-stage", str(REMOTE), "--fault-after", "10"],
        ExitCode.LINK_LOST,
        streams(200, 32, _LOST),
    ),
    Scenario(
        "remote-partition",
        "the link to the remote code2wav stops passing anything (connections stay open) mid-load",
        TWO_HOSTS,
        lambda c: ["--partition-after", "200000", "--"],
        ExitCode.LINK_LOST,
        streams(200, 32, _LOST),
    ),
    Scenario(
        "remote-oom",
        "typed OOM in the remote code2wav: its FATAL last words cross the link",
        TWO_HOSTS,
        lambda c: ["--", "--fault", "oom", "--fault-stage", str(REMOTE), "--fault-after", "3"],
        ExitCode.OOM,
        streams(200, 16, expect(("ok", 200, None), ("error", 500, REMOTE))),
    ),
    Scenario(
        "remote-slow",
        "40 ms more each way on the link to the remote code2wav: slower, all answered (then SIGTERM)",
        TWO_HOSTS,
        lambda c: ["--delay", "0.04", "--"],
        ExitCode.SIGTERM,
        streams(100, 16, expect(("ok", 200, None))),
        stop_after_load=signal.SIGTERM,
    ),
]
