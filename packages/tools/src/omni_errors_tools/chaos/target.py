"""What a scenario runs against: a `Target` turns one launch into the server's command line.

The harness knows nothing about any particular server. It binds a loopback listening socket,
names a fault-marker file, asks the scenario's target for the command (`Target.command(launch)`),
starts it in its own session, waits for `health_path` to answer 200, and watches what the process
leaves behind. A new kind of server (another binary, another plugin, stages in network namespaces)
is a new `Target` next to its scenarios in `omni_errors_tools.chaos.scenarios`; the harness does not
change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = ["Launch", "ServerCommand", "Target"]


@dataclass(frozen=True)
class Launch:
    """One start of a server for one scenario.

    Attributes:
        python: the interpreter to run servers with (the harness's own by default).
        host: the loopback address the server must bind.
        port: the port of `listen_fd`, which the server serves on.
        fault_marker: the file the server appends a line to each time a fault fires
            (`<unix time> <stage> <kind>`); the harness times everything from the first line.
        step_interval: seconds per engine step, for targets that pace their engines.
        startup_timeout: seconds the server may take to start serving.
        args: the scenario's own arguments (its faults), in the target's vocabulary.
        listen_fd: a listening socket already bound to `host:port`. A target whose server can serve
            on an inherited socket hands it over (`ServerCommand.pass_fds`), so no port is chosen
            now and bound later, when another process may have taken it. For one that binds
            `--port` itself (vLLM's `serve`) the harness closes it just before the start.
    """

    python: str
    host: str
    port: int
    fault_marker: Path
    step_interval: float
    startup_timeout: float
    args: tuple[str, ...] = ()
    listen_fd: int | None = None


@dataclass(frozen=True)
class ServerCommand:
    """A command line, the environment variables to add to the harness's own, and the descriptors
    the server inherits (`Launch.listen_fd` when it serves on that socket)."""

    argv: list[str]
    env: Mapping[str, str] = field(default_factory=dict)
    pass_fds: tuple[int, ...] = ()


class Target(Protocol):
    """A server the chaos scenarios can be run against."""

    @property
    def name(self) -> str:
        """What `omni-errors chaos --target NAME` selects."""
        ...

    @property
    def health_path(self) -> str:
        """The path that answers 200 once the server serves."""
        ...

    def command(self, launch: Launch) -> ServerCommand:
        """The command that starts the server for `launch`."""
        ...
