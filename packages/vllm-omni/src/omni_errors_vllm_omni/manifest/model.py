"""The manifest's vocabulary: a `Target` (one replaced attribute) and what it names, its `Kind`, the
`Process` it runs in, the `Hop` it serves, and the calls it counts on (`InExcept`). The package's
docstring says what each field means.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["Hop", "InExcept", "Kind", "Process", "Target"]


class Kind(enum.Enum):
    """Whether a replacement calls the original."""

    #: calls the original on every path (or subclasses it and calls `super()`): upstream fixes still run.
    WRAP = "wrap"
    #: calls the original unless its guard answers first (a record the output carries, a fatal failure
    #: declared, a stage in its rejoin window, a tombstone): upstream fixes run whenever the call passes.
    GUARD = "guard"
    #: does not call it: a fix upstream makes to this body is undone while the plugin is on.
    REPLACE = "replace"


class Process(enum.Enum):
    """The process a patch runs in, as vLLM-Omni 0.30 lays a deployment out (in this order, the
    order `doctor` and the docs list them in)."""

    #: `vllm-omni serve`: the HTTP routes, `AsyncOmni`, and the orchestrator thread with its stage
    #: clients, stage pools, membership controller and registration server (a multi-node head's).
    API_SERVER = "API server"
    #: a stage's own process: `StageDiffusionProc` (its `DiffusionEngine`, executor, and a uniproc
    #: executor's worker), or an LLM stage's `StageEngineCoreProc` for the coordinator heartbeat.
    #: A diffusion stage with one replica in a single-stage pipeline runs inline: this code then
    #: runs in the API server.
    STAGE = "stage process"
    #: a model runner's process: a diffusion worker, or an LLM stage's vLLM worker (connectors);
    #: `DiffusionOutput.from_exception` is called by the engine too, in the stage process.
    WORKER = "worker"
    #: `vllm-omni serve --headless`: the launcher of a remote host's replicas.
    LAUNCHER = "headless launcher"
    #: whatever process the plugin is loaded in (pyzmq's sockets).
    EVERY = "every process"


class Hop(enum.Enum):
    """Which leg of the record's route a patch serves (from the worker where a request failed to the
    client that asked), or which duty beside it: the process's exit code, liveness, membership."""

    WORKER = "worker -> executor"
    ENGINE = "executor -> engine"
    STAGE_TO_CLIENT = "stage -> stage client"
    CLIENT_TO_STAGE = "stage client -> stage"
    ORCHESTRATOR = "stage client -> orchestrator"
    API = "orchestrator -> API"
    METRICS = "failure metrics"
    HTTP = "API -> HTTP client"
    #: a stage's payload for the next stage, through the connectors (the receiver learns its sender failed)
    CONNECTORS = "stage -> stage (connectors)"
    EXIT = "exit code"
    LIVENESS = "liveness"  # a remote replica's links, a stage's hung step
    MEMBERSHIP = "multi-node membership"
    SHUTDOWN = "head shutdown"
    SOCKETS = "deployment sockets"
    #: a request's admission while the engine is paused or asleep (answered, never left waiting)
    ADMISSION = "admission"


@dataclass(frozen=True, slots=True)
class InExcept:
    """Upstream calls `call` inside an `except` block of `caller` ("module:Qual.name"), so
    `sys.exc_info()` there is the failure being answered. With `error_frames`, every call whose
    first argument is a `{"type": "error", ...}` dict must be; otherwise at least one call."""

    caller: str
    call: str
    error_frames: bool = False

    def __str__(self) -> str:
        what = "error frames" if self.error_frames else f"`{self.call}`"
        return f"{what} inside an `except` of `{self.caller.partition(':')[2]}`"


@dataclass(frozen=True, slots=True)
class Target:
    """One replaced attribute; see the module docstring for the fields."""

    module: str
    owner: str | None
    name: str
    patch: str
    kind: Kind
    fingerprints: Mapping[str, str]
    process: Process
    hop: Hop
    does: str
    upstream: str
    relies_on: tuple[str, ...] = ()
    in_except: tuple[InExcept, ...] = ()
    defined_in: str | None = None
    public: bool = False
    upstreamed: Mapping[str, str | None] = field(default_factory=dict)
    upstreamed_at: str | None = None

    @property
    def key(self) -> str:
        """`module:Owner.name`, how logs, doctor and the docs name the target."""
        return f"{self.module}:{self.qualname}"

    @property
    def qualname(self) -> str:
        return f"{self.owner}.{self.name}" if self.owner else self.name

    @property
    def source(self) -> tuple[str, str]:
        """(module, qualname) of the original's definition."""
        if self.defined_in is None:
            return self.module, self.qualname
        module, _, qualname = self.defined_in.partition(":")
        return module, qualname

    @property
    def upstream_source(self) -> tuple[str, str]:
        """(module, qualname) of the definition whose fingerprint says the upstream change is in."""
        if self.upstreamed_at is None:
            return self.source
        module, _, qualname = self.upstreamed_at.partition(":")
        return module, qualname
