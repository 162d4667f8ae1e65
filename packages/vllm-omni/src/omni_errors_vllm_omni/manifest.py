"""Every attribute of vLLM-Omni (and vLLM) the plugin replaces, as data: one `Target` per attribute.

The code that patches (`omni_errors_vllm_omni.register`), the check before it (`verify`), the
generated table in docs/vllm-omni.md (`render_table`), `omni-errors doctor` and the drift suite
(`tests/vllm_omni/test_manifest.py`) all read `TARGETS`. Importing this module imports nothing
but the standard library: it runs in every process vLLM loads plugins in.

An entry names:

- where: `module` (whose attribute is replaced), `owner` (a class in it, or None for a module
  attribute) and `name`; `defined_in` when the original is written elsewhere and imported there;
- how: `patch`, "file:function" of this package, a factory `(module, original) -> replacement`;
  `kind`, whether the replacement calls the original (`WRAP`), calls it unless its guard answers
  first (`GUARD`), or stands in for it (`REPLACE`);
- what it relies on: `relies_on`, the attributes it reads or writes that upstream could rename
  ("[module:]Owner.attr", `Owner` a class in the target's module unless a module is given; for a
  function owner, `attr` is the dotted path it assigns, e.g. `serve_http.app.state.server`), and
  `in_except`, the calls upstream makes inside an `except` block that the patch counts on;
- against what: `fingerprints`, release -> the fingerprint of the original's normalised AST
  (`omni-errors doctor --json` prints the installed one); a target whose installed source has
  another fingerprint refuses the plugin. A `public` target is a documented API of another
  library (pyzmq's `Socket.bind`, say), wrapped the same way whatever its version: only its
  presence is checked;
- where it runs: `process`, the process the patched code runs in (`Process`), and `hop`, the leg of
  the record's route from a failing stage to its client, or the duty beside that route, it serves
  (`Hop`);
- and why: `does` and `upstream`, the change in vLLM-Omni that would make it unnecessary;
- once that change is written (the series in `upstream/vllm-omni/`, docs/upstream.md): `upstreamed`,
  release -> the fingerprint after the series of the definition that shows it (`upstreamed_at`,
  "module:Qual", when it is not the target's original), None where the series deletes it. A target
  whose installed source shows it is *upstreamed*: the plugin patches nothing there.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["TARGETS", "Hop", "InExcept", "Kind", "Process", "Target", "render_table", "targets_by_module"]


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


_D = "vllm_omni.diffusion"
_E = "vllm_omni.entrypoints"
_C = "vllm_omni.distributed.omni_connectors"
_R030 = "0.30.0"
# A target the series changes but does not retire: the patch still holds on the new body.
_S030 = "0.30.0+series"
# `AsyncOmni.generate` waits for admission with the gate's `admit` from patch 23 on: its body between.
_S030_23 = "0.30.0+series (patches 23-28)"
# An upstream change whose place a later patch changes again: its fingerprint on the prefixes before that patch.
_R030_BEFORE_25 = "0.30.0 (patches 19-24)"
# Patches 32 to 35 change places earlier patches' changes are read at (per-replica isolation in
# patches 28 and 30's, a remote LLM replica in 30 and 31's and the LLM stage's run in 32's, the
# LLM launcher's wait beside patch 11's, the death notice's sending in 32's): their fingerprints on
# the prefixes before.
_R030_BEFORE_32 = "0.30.0 (before patch 32)"
_R030_BEFORE_33 = "0.30.0 (before patch 33)"
_R030_BEFORE_34 = "0.30.0 (before patch 34)"
_R030_BEFORE_35 = "0.30.0 (before patch 35)"
_TRANSPORT = "_OmniConnectorPayloadTransportMixin"
_M = "vllm_omni.engine.membership_controller"
_LIVENESS_UPSTREAM = "remote clients watch their links (ZMTP heartbeats, a socket monitor)"
# vLLM makes, binds and connects an LLM stage's engine-core sockets inside `MPClient.__init__` and the
# engine core's IO threads, with no hook for their options or a monitor: a change in vLLM (docs/upstream.md).
_ENGINE_LINKS_UPSTREAM = (
    "vLLM lets the caller of its engine-core client and `EngineCoreProc` watch the sockets they make (options and "
    "a monitor before they bind or connect); vLLM-Omni then watches a remote replica's links itself"
)
_ADMISSION_UPSTREAM = "a paused or sleeping engine rejects new requests with 503, as vLLM's `engine_paused` does"
_ADMISSION_FIELDS = (
    "AsyncOmni._pause_cond",
    "AsyncOmni._paused",
    "AsyncOmni._hold_admission_until_resume",
    "AsyncOmni._paused_stage_ids",
    "AsyncOmni._sleeping_tags",
    "AsyncOmni._stage_sleeping_tags",
    "AsyncOmni._level2_sleeping",
    "AsyncOmni.engine",
)
_REJOIN_UPSTREAM = "a stage without replicas answers 503 during a documented rejoin window"
_COORD_CLIENT = "vllm_omni.distributed.omni_coordinator.omni_coord_client_for_stage"
_SP = "vllm_omni.engine.stage_engine_core_proc"
_SC = "vllm_omni.engine.stage_engine_core_client"

# fmt: off
TARGETS: tuple[Target, ...] = (
    Target(f"{_D}.data", "DiffusionOutput", "from_exception", "diffusion:make_from_exception", Kind.WRAP,
           {_R030: "7d84b22e58b0f273"}, upstreamed={_R030: "f9015b1a7bdd2edc"},
           process=Process.WORKER, hop=Hop.WORKER,
           does="classifies the exception while its type is known (stage side: no raw fallbacks; OOM and "
                "fatal types along the cause chain) and attaches the record (`omni_error`) and its exit code; "
                "fills the flat `error`/`error_status_code`/`error_type` from it, sanitized",
           upstream="`from_exception` attaches the record (`omni_errors.carry.attach`: `omni_error`)"),
    Target(f"{_D}.executor.uniproc_executor", "UniProcDiffusionExecutor", "collective_rpc",
           "diffusion:make_collective_rpc", Kind.WRAP, {_R030: "f70c10935e8f26bb"},
           upstreamed={_R030: "499a2e41f1ae70df"},
           upstreamed_at=f"{_D}.executor.uniproc_executor:UniProcDiffusionExecutor.execute_request",
           process=Process.STAGE, hop=Hop.WORKER,
           does="a failing worker answers `DiffusionOutput.from_exception(exc)`, as a multiprocess worker "
                "does, instead of `DiffusionOutput(error=str(exc))`",
           upstream="`execute_request` calls `from_exception`"),
    Target(f"{_D}.diffusion_engine", "DiffusionEngine", "postprocess_output", "diffusion:make_postprocess_output",
           Kind.GUARD, {_R030: "a81aee66d48322da"}, upstreamed={_R030: "d22d16037bb518a6"},
           process=Process.STAGE, hop=Hop.ENGINE,
           does="an output carrying a record raises `rebuild(record)` (client, server or fatal carrier) instead "
                "of `RuntimeError(text)` or a status-guessed client error",
           upstream="`postprocess_output` raises `rebuild` of the record the output carries"),
    Target(f"{_D}.diffusion_engine", "DiffusionEngine", "_emit_outputs", "diffusion:make_emit_outputs",
           Kind.WRAP, {_R030: "30d90d0269fc51e4"}, upstreamed={_R030: "3d6e4d54931bc8de"},
           relies_on=("DiffusionEngine._fail_engine",),
           process=Process.STAGE, hop=Hop.ENGINE,
           does="after delivering a fatal record, calls `_fail_engine`: queued requests are answered, the "
                "executor stops",
           upstream="`_emit_outputs` fails the engine on a delivered fatal record (`rebuild`), its exit code "
                    "noted (`omni_errors.fatal.process.note`)"),
    Target(f"{_D}.stage_diffusion_proc", None, "OmniMsgpackEncoder", "diffusion:make_frame_encoder", Kind.WRAP,
           {_R030: "87d8b337be6c9344"}, upstreamed={_R030: "99d7cf7de57dfa28", _R030_BEFORE_25: "26fc1440648624f6"},
           upstreamed_at=f"{_D}.stage_diffusion_proc:StageDiffusionProc.run_loop",
           defined_in="vllm_omni.distributed.omni_connectors.utils.serialization:OmniMsgpackEncoder",
           in_except=(InExcept(f"{_D}.stage_diffusion_proc:StageDiffusionProc.run_loop", "encode", True),),
           process=Process.STAGE, hop=Hop.STAGE_TO_CLIENT,
           does="error frames (built inside the `except` that caught the failure) get top-level keys "
                "`omni_error` (the record's frame) and `omni_error_exit`; old receivers ignore them",
           upstream="`run_loop`'s error frames add `omni_errors.carry.failure_frame_fields` of the exception they "
                    "answer"),
    Target(f"{_D}.stage_diffusion_proc", "StageDiffusionProc", "close", "diffusion:make_proc_close", Kind.WRAP,
           {_R030: "136658ae3f9008df"}, upstreamed={_R030: "703d0a3a3ecf2207"},
           process=Process.STAGE, hop=Hop.EXIT,
           does="a proc that saw a fatal failure exits with the documented code (81 OOM, 80 fatal, 86 link to the "
                "head lost) instead of 1",
           upstream="`close` ends the proc with the fatal state's code (`omni_errors.fatal.process.exit_code`)"),
    Target(f"{_D}.stage_diffusion_proc", "StageDiffusionProc", "run_loop", "diffusion:make_run_loop", Kind.WRAP,
           {_R030: "dc6a8baff385f585", _S030: "26fc1440648624f6"}, upstreamed={_R030: "99d7cf7de57dfa28"},
           process=Process.STAGE, hop=Hop.LIVENESS,
           does="its two sockets are the proc's links to the head: a remote proc gives them ZMTP heartbeats and a "
                "monitor, and when the head is gone or cut off it stops its loop and exits 86",
           upstream="the remote proc watches its links to the head"),
    Target(f"{_D}.stage_diffusion_proc", "StageDiffusionProc", "_signal_fatal_engine_failure",
           "diffusion:make_signal_fatal", Kind.WRAP, {_R030: "4f90d79335b677eb"},
           upstreamed={_R030: "99d7cf7de57dfa28", _R030_BEFORE_25: "26fc1440648624f6"},
           upstreamed_at=f"{_D}.stage_diffusion_proc:StageDiffusionProc.run_loop",
           relies_on=("StageDiffusionProc._fatal_event",),
           process=Process.STAGE, hop=Hop.STAGE_TO_CLIENT,
           does="before the proc sends `DIFFUSION_PROC_DEAD`, a frame with the record it dies of and its exit code "
                "(no request id: a receiver without the plugin only logs it)",
           upstream="`run_loop` sends an error frame with `failure_frame_fields(EngineDeadError())` before "
                    "`DIFFUSION_PROC_DEAD` when the fatal event ended it"),
    Target(_SP, "StageEngineCoreProc", "_send_engine_dead", "engine_core:make_send_engine_dead", Kind.WRAP,
           {_R030: "dfe6682ef715ae20"},
           upstreamed={_R030: "0d93fcffa187879a", _R030_BEFORE_35: "13f845d08e4a936f"},
           defined_in="vllm.v1.engine.core:EngineCoreProc._send_engine_dead",
           upstreamed_at=f"{_SP}:StageEngineCoreProc._send_engine_dead",
           relies_on=("vllm.v1.engine.core:EngineCoreProc.output_queue", "vllm.v1.engine.core:EngineCoreProc.addresses",
                      "vllm.v1.engine.core:EngineCoreProc.engine_index"),
           in_except=(InExcept(f"{_SP}:StageEngineCoreProc.run_stage_core", "_send_engine_dead"),),
           process=Process.STAGE, hop=Hop.STAGE_TO_CLIENT,
           does="an LLM stage's EngineCore sends the record it dies of and its exit code (81 for an OOM by type, "
                "80 otherwise) before vLLM's bare `ENGINE_CORE_DEAD`, as trailing fields of an empty outputs "
                "message (a client without the plugin drops it)",
           upstream="`StageEngineCoreProc._send_engine_dead` sends a death notice (`omni_errors.carry.death_notice` "
                    "of the exception that ended the loop) in `OmniEngineCoreOutputs`' trailing fields before the "
                    "dead signal"),
    Target(_SP, "StageEngineCoreProc", "_process_engine_step", "engine_core:make_process_engine_step", Kind.WRAP,
           {_R030: "b066d9bebad44e0c"}, upstreamed={_R030: "41b51dfe1282fb40"},
           defined_in="vllm.v1.engine.core:EngineCoreProc._process_engine_step",
           upstreamed_at=f"{_SP}:StageEngineCoreProc._process_engine_step",
           relies_on=("vllm.v1.engine.core:EngineCoreProc.output_queue", "vllm.v1.engine.core:EngineCoreProc.addresses",
                      "vllm.v1.engine.core:EngineCoreProc.engine_index",
                      "vllm.v1.engine.core:EngineCoreProc._send_engine_dead"),
           process=Process.STAGE, hop=Hop.LIVENESS,
           does="each step of an LLM stage's EngineCore runs under a deadline (`OMNI_ERRORS_STEP_DEADLINE_S`, 120 s): "
                "a forward that has not returned by then (a stuck kernel, a collective waiting forever) is a hung "
                "stage, which nothing on its loop can notice; a watching thread sends the death notice (84) and "
                "vLLM's dead signal, and ends the process with 84, so its requests are answered instead of waiting "
                "forever",
           upstream="`StageEngineCoreProc._process_engine_step` runs each step under "
                    "`omni_errors.fatal.step_deadline.StepDeadline`, whose callback sends the death notice "
                    "(`omni_errors.carry.hung_notice`) and ends the process"),
    Target(_SP, "StageEngineCoreProc", "_handle_request_preproc_error", "engine_core:make_preproc_error",
           Kind.GUARD, {_R030: "dd62305b4f53830a"}, upstreamed={_R030: "61348b789537f14e"},
           defined_in="vllm.v1.engine.core:EngineCoreProc._handle_request_preproc_error",
           upstreamed_at=f"{_SP}:StageEngineCoreProc._handle_request_preproc_error",
           relies_on=("vllm.v1.engine.core:EngineCoreProc.output_queue",),
           in_except=(InExcept("vllm.v1.engine.core:EngineCoreProc.process_input_sockets",
                               "_handle_request_preproc_error"),),
           process=Process.STAGE, hop=Hop.STAGE_TO_CLIENT,
           does="a request an LLM stage refuses while preparing it (its own validation) is answered with its "
                "record in the request's output (category, status, `parameter`), and its sanitized text as "
                "`stop_reason`, instead of vLLM 0.30's bare `FinishReason.ERROR` (a 500 \"Stage request failed\")",
           upstream="`StageEngineCoreProc` answers a refused request with the record of its exception"),
    Target(_SP, "StageEngineCoreProc", "run_stage_core", "engine_core:make_run_stage_core", Kind.WRAP,
           {_R030: "09d8b96062212e1b", _S030: "6dc9782fc7e42c23"}, upstreamed={_R030: "0a786e3882a47aef"},
           process=Process.STAGE, hop=Hop.LIVENESS,
           does="an LLM stage process loads vLLM's plugins before its handshake with the API process (vLLM "
                "loads them while it builds the engine core, after it): on a remote stage that socket gets the "
                "plugin's CURVE (a head that requires it never answered a plaintext handshake) and its links "
                "the watch",
           upstream="`run_stage_core` loads vLLM's general plugins first"),
    Target(_SP, "StageEngineCoreProc", "_perform_handshakes", "engine_core:make_perform_handshakes", Kind.WRAP,
           {_R030: "8a6c4aba7f735fb5"}, defined_in="vllm.v1.engine.core:EngineCoreProc._perform_handshakes",
           process=Process.STAGE, hop=Hop.LIVENESS,
           does="a remote LLM stage's engine core (its client's sockets are TCP: a `--headless` stage) watches its "
                "links to the head (TCP keepalive, a socket monitor; its outputs keep their linger); when the "
                "head is gone or cut off it ends with 86 instead of running on unreachable",
           upstream=_ENGINE_LINKS_UPSTREAM),
    Target(_SP, "StageEngineCoreProc", "shutdown", "engine_core:make_engine_shutdown", Kind.WRAP,
           {_R030: "7578314354eefc7a"}, upstreamed={_R030: "0a786e3882a47aef", _R030_BEFORE_33: "6dc9782fc7e42c23"},
           defined_in="vllm.v1.engine.core:EngineCore.shutdown",
           upstreamed_at=f"{_SP}:StageEngineCoreProc.run_stage_core",
           process=Process.STAGE, hop=Hop.EXIT,
           does="an LLM stage process whose EngineCore died exits with the documented code (81 OOM, 80 fatal) "
                "instead of 1 (or -15: it ignores the API process's SIGTERM while it shuts down)",
           upstream="`run_stage_core` ends a dead engine's process with the fatal state's code "
                    "(`omni_errors.fatal.process.exit_code`), ignoring SIGTERM while it shuts down"),
    Target(_SC, None, "OmniEngineCoreOutputs", "engine_core:make_engine_core_outputs", Kind.WRAP,
           {_R030: "c7b55d7baa5bcda3"}, upstreamed={_R030: "56a33762962c53fe"},
           defined_in="vllm_omni.engine:OmniEngineCoreOutputs",
           process=Process.API_SERVER, hop=Hop.STAGE_TO_CLIENT,
           does="the LLM stage client decodes the records an EngineCore's outputs carry: its death notice's "
                "(and exit code), a refused request's",
           upstream="`OmniEngineCoreOutputs` has the record's fields"),
    Target(_SC, "StageEngineCoreClientBase", "__init__", "engine_core:make_client_init", Kind.WRAP,
           {_R030: "28cf8164cf7652ec"}, upstreamed={_R030: "22ef98ecb0f2dc15"},
           upstreamed_at=f"{_SC}:StageEngineCoreClientBase.process_engine_outputs",
           relies_on=("vllm.v1.engine.core_client:MPClient.decoder",),
           process=Process.API_SERVER, hop=Hop.STAGE_TO_CLIENT,
           does="the LLM stage client keeps the record its EngineCore said it died of (`last_fatal`), so that a "
                "dead LLM stage ends the pipeline with 80 or 81, not 85 (\"vanished without a word\")",
           upstream="the client keeps its engine's death notice (`StageEngineCoreClientBase.process_engine_outputs`, "
                    "vLLM's hook for each batch; `last_fatal`) and says it through `last_words()`"),
    Target(_SC, "StageEngineCoreClientBase", "make_async_mp_client", "engine_core:make_async_mp_client", Kind.WRAP,
           {_R030: "b970a16b0d261141"}, relies_on=("vllm.v1.engine.core_client:MPClient.start_engine_core_monitor",),
           process=Process.API_SERVER, hop=Hop.LIVENESS,
           does="a remote LLM replica's client (a multi-node head's: no engine manager, its EngineCore on another "
                "host) watches its two links (TCP keepalive, a socket monitor), which stand in for the engine "
                "manager vLLM's own monitor reads: a remote stage killed or cut off is a dead engine, its requests "
                "answered and its stage's rejoin window opened, instead of requests that never end",
           upstream=_ENGINE_LINKS_UPSTREAM),
    Target("vllm_omni.outputs", "OmniRequestOutput", "from_error", "client:make_from_error", Kind.WRAP,
           {_R030: "8744bdac53021431"}, upstreamed={_R030: "4957dfa03090d50a"},
           in_except=(InExcept(f"{_D}.inline_stage_diffusion_client:InlineStageDiffusionClient._dispatch_request",
                               "from_error"),),
           process=Process.API_SERVER, hop=Hop.STAGE_TO_CLIENT,
           does="called inside the `except` that caught the failure, attaches the record of the exception "
                "being handled",
           upstream="`from_error(..., exc=)` attaches the record of `exc` (`omni_errors.carry.record_failure`, "
                    "`attach`); the inline client passes the exception it caught"),
    Target(f"{_D}.stage_diffusion_client", "StageDiffusionClient", "_connect_transport",
           "client:make_connect_transport", Kind.WRAP, {_R030: "52fe975a91adf049", _S030: "6c8ab5a3fe04a841"},
           upstreamed={_R030: "26f8c62e2e0c8116"},
           relies_on=("StageDiffusionClient._request_socket", "StageDiffusionClient._proc_manager",
                      "StageDiffusionClient.stage_id", "StageDiffusionClient.replica_id"),
           process=Process.API_SERVER, hop=Hop.LIVENESS,
           does="the request socket gets a send deadline (`SNDTIMEO` 1 s) and `LINGER` 0; a remote replica's two "
                "links get ZMTP heartbeats and a socket monitor, and stand in for the process manager it lacks "
                "(`link_watch.RemoteReplica`): `check_health`, `get_diffusion_output_nowait`, `collective_rpc_async` "
                "and the sentinel thread see the link's state",
           upstream="the client sets send timeouts; " + _LIVENESS_UPSTREAM),
    Target(f"{_D}.stage_diffusion_client", "StageDiffusionClient", "add_request_async", "client:make_add_request",
           Kind.WRAP, {_R030: "f61fa30fcb0ba238"}, upstreamed={_R030: "9e7ea8023eab098a"},
           relies_on=("StageDiffusionClient._engine_dead", "StageDiffusionClient.stage_id"),
           process=Process.API_SERVER, hop=Hop.CLIENT_TO_STAGE,
           does="a send that misses its deadline marks the stage dead (`EngineDeadError`) instead of blocking "
                "(seed 001's hang)",
           upstream="the client sets send timeouts"),
    Target(f"{_D}.stage_diffusion_client", "StageDiffusionClient", "collective_rpc_async",
           "client:make_collective_rpc_async", Kind.WRAP, {_R030: "ec8d0dbdd258b021"},
           upstreamed={_R030: "4b6a6f06c0cd3c71"},
           relies_on=("StageDiffusionClient._engine_dead",),
           process=Process.API_SERVER, hop=Hop.CLIENT_TO_STAGE,
           does="a control message that misses its deadline marks the stage dead",
           upstream="the client sets send timeouts"),
    Target(f"{_D}.stage_diffusion_client", "StageDiffusionClient", "abort_requests_async", "client:make_abort",
           Kind.WRAP, {_R030: "c7191ae4342c72b3"}, upstreamed={_R030: "07e65ef9f0f10e36"},
           relies_on=("StageDiffusionClient._engine_dead",),
           process=Process.API_SERVER, hop=Hop.CLIENT_TO_STAGE,
           does="an abort that misses its deadline is dropped (nothing is left to abort on a gone stage)",
           upstream="the client sets send timeouts"),
    Target(f"{_D}.stage_diffusion_client", "StageDiffusionClient", "shutdown", "client:make_shutdown",
           Kind.REPLACE, {_R030: "1d9846b8b7905a25"}, upstreamed={_R030: "531d000b7caccf03"},
           relies_on=("StageDiffusionClient._shutting_down", "StageDiffusionClient._request_socket",
                      "StageDiffusionClient._response_socket", "StageDiffusionClient._encoder",
                      "StageDiffusionClient._proc_manager", "StageDiffusionClient._zmq_ctx"),
           process=Process.API_SERVER, hop=Hop.CLIENT_TO_STAGE,
           does="sends the shutdown without blocking and gives the proc 0.5 s after SIGTERM before SIGKILL; "
                "an OOM exit of the proc is the server's exit code too",
           upstream="the client bounds its shutdown"),
    Target(f"{_D}.stage_diffusion_client", None, "OmniMsgpackDecoder", "client:make_frame_decoder", Kind.WRAP,
           {_R030: "e5d4fd4e8f4b9909"}, upstreamed={_R030: "2cde9c0c514ada65"},
           upstreamed_at=f"{_D}.stage_diffusion_client:StageDiffusionClient._drain_responses",
           defined_in="vllm_omni.distributed.omni_connectors.utils.serialization:OmniMsgpackDecoder",
           process=Process.API_SERVER, hop=Hop.STAGE_TO_CLIENT,
           does="a record-carrying request error frame becomes that request's error output with the record "
                "attached; a record frame without a request (the proc's death notice) or a fatal record is kept "
                "as the record the replica died of",
           upstream="`_drain_responses` attaches an error frame's record to the request's error output, notes its "
                    "exit code, and keeps the last fatal record (`StageDiffusionClient.last_fatal`)"),
    Target("vllm_omni.engine.orchestrator", None, "ErrorMessage", "orchestrator:make_error_message", Kind.WRAP,
           {_R030: "bc7fcae08bcfba98"}, upstreamed={_R030: "a27b4d696ec92824"},
           defined_in="vllm_omni.engine.messages:ErrorMessage",
           process=Process.API_SERVER, hop=Hop.ORCHESTRATOR,
           does="`RecordErrorMessage` (a subclass with `details`) is what the orchestrator builds; one built "
                "from flat fields only gets its record from them (`omni_errors.semantics.legacy`)",
           upstream="`ErrorMessage.details: OmniErrorDetails`"),
    Target("vllm_omni.engine.orchestrator", "OrchestratorBase", "__init__", "orchestrator:make_orchestrator_init",
           Kind.WRAP, {_R030: "b585c99dd1ccc895"}, upstreamed={_R030: "d173fa6ca8db955b"},
           relies_on=("OrchestratorBase._membership", "OrchestratorBase._shutdown_event",
                      f"{_M}:MembershipController._shutdown_event"),
           process=Process.API_SERVER, hop=Hop.SHUTDOWN,
           does="the membership controller shares the orchestrator's shutdown event: its watcher ends when the "
                "orchestrator stops (vLLM-Omni waited for it first, so every multi-node head shutdown took the "
                "engine's 30 s join timeout)",
           upstream="the orchestrator stops the membership watcher before it waits for its tasks"),
    Target("vllm_omni.engine.orchestrator", "OrchestratorBase", "_handle_stage_error",
           "orchestrator:make_handle_stage_error", Kind.REPLACE, {_R030: "2d273c998302652c"},
           upstreamed={_R030: "d5ea743f50419c91", _R030_BEFORE_33: "d130c47c0d126c92",
                       _R030_BEFORE_32: "01ace570dd19ac74"},
           relies_on=("OrchestratorBase._cfg_tracker", "OrchestratorBase.output_async_queue",
                      "OrchestratorBase._cleanup_request_ids", "OrchestratorBase.request_states",
                      "OrchestratorBase.request_async_queue", "OrchestratorBase.stage_pools",
                      "OrchestratorBase._membership", "vllm_omni.engine.stage_pool:StagePool.get_bound_replica_id",
                      "vllm_omni.engine.stage_pool:StagePool.live_replica_ids",
                      "vllm_omni.engine.stage_pool:StagePool.evict_replica",
                      f"{_M}:MembershipController.handle_unregister",
                      f"{_D}.stage_diffusion_client:StageDiffusionClient._drain_responses",
                      f"{_D}.stage_diffusion_client:StageDiffusionClient._decoder",
                      f"{_D}.stage_diffusion_client:StageDiffusionClient._proc_manager",
                      f"{_D}.inline_stage_diffusion_client:InlineStageDiffusionClient._engine_dead"),
           process=Process.API_SERVER, hop=Hop.ORCHESTRATOR,
           does="reads the stage's record, else vLLM's `RequestError` (LLM stages, vLLM >= 0.31), else the flat "
                "fields; keeps `stage_id`, `parameter`, `request_id`; a fatal record from one replica of a stage "
                "that has another is a lost replica's 503; otherwise a fatal record ends the pipeline: every "
                "in-flight request gets it, the orchestrator stops through its own `ShutdownRequestMessage` (from a "
                "remote replica, the replica is lost at once instead, not when its links drop: see "
                "`_handle_dead_replica`)",
           upstream="`_handle_stage_error` reads `omni_errors.carry.output_record`; a fatal record ends the pipeline "
                    "through `_fail_pipeline` (`omni_errors.fatal.process.end_pipeline`)"),
    Target("vllm_omni.engine.orchestrator", "OrchestratorBase", "_handle_dead_replica",
           "orchestrator:make_handle_dead_replica", Kind.GUARD, {_R030: "8c64ecd55938f339"},
           upstreamed={_R030: "16b43bf7eed46488", _R030_BEFORE_33: "6427e56f818c3087"},
           relies_on=("OrchestratorBase.stage_pools", "OrchestratorBase._membership",
                      f"{_M}:MembershipController.handle_unregister",
                      "vllm_omni.engine.stage_pool:StagePool.evict_replica",
                      "vllm_omni.engine.stage_pool:StagePool.live_replica_ids",
                      "OrchestratorBase._cleanup_request_ids",
                      f"{_D}.stage_diffusion_client:StageDiffusionClient._drain_responses",
                      f"{_D}.stage_diffusion_client:StageDiffusionClient._decoder",
                      f"{_D}.stage_diffusion_client:StageDiffusionClient._proc_manager",
                      f"{_D}.inline_stage_diffusion_client:InlineStageDiffusionClient._engine_dead"),
           process=Process.API_SERVER, hop=Hop.ORCHESTRATOR,
           does="vLLM-Omni's per-replica eviction stays, and while the stage has another live replica the dead "
                "one's requests get a lost replica's 503 with `Retry-After`, not a fatal answer (which ended the "
                "server); when a stage has no live replica left, the pipeline "
                "ends (exit 85, or the code of the record its proc or LLM EngineCore sent before it died, read "
                "first; 80 for an inline stage, marked dead only when its executor reported its loss). A lost "
                "remote replica is answered and detached through the membership's own unregister, and its "
                "stage waits for a replica (`distributed`)",
           upstream="each stage client's `last_words()` and `omni_errors.carry.died_of` give the exit code; a stage "
                    "without a live replica ends the pipeline (`_fail_pipeline`); a remote replica is detached and "
                    "its stage waits (`omni_errors.server.rejoin.rejoin().wait_for_replica`)"),
    Target("vllm_omni.engine.orchestrator", "OrchestratorBase", "_fail_request_dead_stage",
           "distributed:make_fail_request_dead_stage", Kind.GUARD, {_R030: "a374c22dcbdc2012"},
           upstreamed={_R030: "6af94011aaad1faa", _R030_BEFORE_32: "2050b14b952da0ad"},
           relies_on=("OrchestratorBase.output_async_queue", "OrchestratorBase._cleanup_request_ids",
                      "OrchestratorBase._cfg_tracker", "vllm_omni.engine.stage_pool:StagePool.is_distributed",
                      "vllm_omni.engine.stage_pool:StagePool.get_bound_replica_id",
                      "vllm_omni.engine.stage_pool:StagePool.live_replica_ids"),
           process=Process.API_SERVER, hop=Hop.MEMBERSHIP,
           does="in multi-node mode a request whose stage has no live replica gets 503 with `Retry-After`, not "
                "a fatal record (a replica may register again); one sent to a replica that just died while its "
                "stage has another gets a lost replica's 503",
           upstream=_REJOIN_UPSTREAM),
    Target(_M, None, "ErrorMessage", "orchestrator:make_error_message", Kind.WRAP, {_R030: "bc7fcae08bcfba98"},
           upstreamed={_R030: "a27b4d696ec92824"},
           defined_in="vllm_omni.engine.messages:ErrorMessage",
           process=Process.API_SERVER, hop=Hop.ORCHESTRATOR,
           does="the membership controller's answers (a replica that disappeared) carry a record with the "
                "request's `request_id` and `stage_id`",
           upstream="`ErrorMessage.details: OmniErrorDetails`"),
    Target(_M, "MembershipController", "start", "distributed:make_membership_start", Kind.WRAP,
           {_R030: "2a2c231d17785c70"}, upstreamed={_R030: "4c2b7f08bc6b15cc"},
           process=Process.API_SERVER, hop=Hop.MEMBERSHIP,
           does="the head of a multi-node deployment follows the lost-replica policy (`distributed`)",
           upstream="`start` makes the stages decide when the head ends (`omni_errors.fatal.process.defer_to_stages`)"),
    Target(_M, "MembershipController", "_do_register", "distributed:make_do_register", Kind.WRAP,
           {_R030: "5128e408ef837a72"}, upstreamed={_R030: "66acc96cd7d5f084"},
           process=Process.API_SERVER, hop=Hop.MEMBERSHIP,
           does="a replica that attaches ends its stage's rejoin window: service is restored without a restart",
           upstream="`_do_register` closes its stage's window (`omni_errors.server.rejoin`)"),
    Target(_COORD_CLIENT, "OmniCoordClientForStage",
           "_heartbeat_loop", "distributed:make_heartbeat_loop", Kind.WRAP, {_R030: "2d15fbec07fb0680"},
           upstreamed={_R030: "07362d7dbbd96adf"},
           upstreamed_at=f"{_COORD_CLIENT}:OmniCoordClientForStage.__init__",
           relies_on=("OmniCoordClientForStage._heartbeat_interval",),
           process=Process.STAGE, hop=Hop.MEMBERSHIP,
           does="a stage heartbeats the coordinator every second instead of every 5 s, so that an "
                "`--omni-heartbeat-timeout` under 5 s no longer detaches healthy replicas",
           upstream="the stage's heartbeat interval follows the coordinator's timeout"),
    Target("vllm_omni.engine.stage_pool", "StagePool", "pick", "distributed:make_pick", Kind.GUARD,
           {_R030: "a0d8aedc1c81ac3f"}, upstreamed={_R030: "eb66af62a2eec8b2"},
           relies_on=("StageUnavailableError", "StagePool.stage_id"),
           process=Process.API_SERVER, hop=Hop.MEMBERSHIP,
           does="a stage in its rejoin window refuses a request at once instead of polling 10 s for a replica",
           upstream=_REJOIN_UPSTREAM),
    Target("vllm_omni.engine.stage_engine_startup", None, "_POLL_PERIOD_MS", "distributed:make_registration_poll",
           Kind.REPLACE, {_R030: "68dcec38467b361e"}, upstreamed={_R030: "1909764715bb9fa4"},
           process=Process.API_SERVER, hop=Hop.SHUTDOWN,
           does="the registration server's poll is 0.1 s instead of 5 s: `OmniMasterServer.stop` joins its "
                "thread, so a head's shutdown waited up to 5 s for it",
           upstream="`stop` wakes the registration server"),
    Target("vllm_omni.engine.stage_engine_startup", None, "wait_for_diffusion_manager_liveness",
           "distributed:make_wait_for_diffusion_replicas", Kind.REPLACE, {_R030: "047139995bdeec4d"},
           upstreamed={_R030: "24306a0cd17fb8b4", _R030_BEFORE_34: "5533f8e0017a41bc"},
           process=Process.LAUNCHER, hop=Hop.EXIT,
           does="the headless launcher reaps its replica before it reads the exit code (vLLM-Omni reads it first "
                "and exits 0 or 1 at random) and exits with the replica's documented code (80, 81, 86; 85 for a "
                "signal)",
           upstream="the launcher joins the replica and exits with its code"),
    Target("vllm_omni.engine.stage_engine_startup", None, "launch_headless_replica_group",
           "distributed:make_headless_replica_group", Kind.WRAP, {_R030: "197137bb35e935e6"},
           upstreamed={_R030: "0a51b746f16df9fb"},
           upstreamed_at="vllm_omni.engine.stage_engine_startup:launch_headless_llm_replicas",
           relies_on=("vllm_omni.engine.stage_engine_core_proc_manager:StageEngineCoreProcManager.processes",),
           process=Process.LAUNCHER, hop=Hop.EXIT,
           does="an LLM stage's headless launcher, which waited with `wait_for_manager_liveness` and exited 0 "
                "whatever its replica ended with, reaps the replica and exits with its documented code (80, 81, "
                "86; 85 for a signal), as a diffusion stage's does",
           upstream="`launch_headless_llm_replicas` waits with `wait_for_llm_manager_liveness`, which ends the "
                    "launcher with its replica's code"),
    Target(f"{_E}.omni_base", "OmniBase", "_raise_nonfatal_error_message", "api:make_raise_error_message",
           Kind.REPLACE, {_R030: "6c02461461783a19"}, upstreamed={_R030: "a0cc4bd9f29e11c5"},
           process=Process.API_SERVER, hop=Hop.API,
           does="raises `rebuild(record)` instead of guessing client-or-`RuntimeError` from the status; a 503 on "
                "a multi-node head waiting for a replica says when to retry (`omni_errors.server.rejoin.retry_after`)",
           upstream="the same"),
    Target(f"{_E}.omni_base", "OmniBase", "_record_request_failure_once", "api:make_record_failure", Kind.WRAP,
           {_R030: "e32500db98babfb0"}, upstreamed={_R030: "1dd29c144bf5e24d"},
           in_except=(InExcept(f"{_E}.async_omni:AsyncOmni.generate", "_record_request_failure_once"),),
           process=Process.API_SERVER, hop=Hop.METRICS,
           does="a client failure is counted as `requests_failed_total{reason=\"client_error\"}`, not "
                "`stage_error`",
           upstream="the failure reason follows the record's category"),
    Target(f"{_E}.omni_base", None, "normalize_failure_reason", "api:make_normalize_reason", Kind.WRAP,
           {_R030: "95a3bec30130ec9b"},
           defined_in="vllm_omni.metrics.utils:normalize_failure_reason",
           upstreamed={_R030: "072bbf6f669cfbb2"}, upstreamed_at="vllm_omni.metrics.utils:FAILURE_REASONS",
           process=Process.API_SERVER, hop=Hop.METRICS,
           does="keeps the `client_error` reason",
           upstream="the failure reason follows the record's category"),
    Target(f"{_E}.async_omni_base", "AsyncOmniBase", "_abort_internal_requests", "api:make_abort_internal",
           Kind.GUARD, {_R030: "5f6f535a08508c63"}, upstreamed={_R030: "6b15af6eb4983b77"},
           process=Process.API_SERVER, hop=Hop.API,
           does="after a fatal failure, no 2 s abort wait before answering",
           upstream="a dead engine fails requests immediately"),
    Target(f"{_E}.async_omni", "AsyncOmni", "generate", "api:make_generate", Kind.GUARD,
           {_R030: "aca56e6e65c2909b", _S030: "4848a68da226b7bf", _S030_23: "1147acfa1c6ac474"},
           upstreamed={_R030: "711af19cd484aca5"},
           process=Process.API_SERVER, hop=Hop.API,
           does="after a fatal failure, a new request gets the fatal record at once; on a multi-node head while a "
                "stage waits for a replica, 503 with `Retry-After` (`omni_errors.server.rejoin.refuse_new_request`)",
           upstream="a dead engine fails requests immediately"),
    Target(f"{_E}.async_omni", "AsyncOmni", "__init__", "admission:make_init", Kind.WRAP,
           {_R030: "f21a1147bc4f6565"}, upstreamed={_R030: "dc9fcc4a975311ea"},
           relies_on=(*_ADMISSION_FIELDS, "AsyncOmni._submit_with_admission"),
           process=Process.API_SERVER, hop=Hop.ADMISSION,
           does="`_pause_cond` is an `AdmissionGate` (its `wait_for(lambda: not self._paused)` is `admit`): a "
                "request's wait for admission (paused, asleep, a sleep or wake-up running) ends after 0.5 s "
                "(`OMNI_ERRORS_ADMISSION_WAIT_S`) with 503 naming the stage, "
                "the state and how to leave it, and `Retry-After` (`OMNI_ERRORS_RETRY_AFTER_S`, 2 s)",
           upstream=_ADMISSION_UPSTREAM),
    Target(f"{_E}.async_omni", "AsyncOmni", "sleep", "admission:make_sleep", Kind.WRAP,
           {_R030: "cae33c385e02bbb2"}, upstreamed={_R030: "c23fae4f6c8816dc"},
           relies_on=_ADMISSION_FIELDS,
           process=Process.API_SERVER, hop=Hop.ADMISSION,
           does="a sleep that raised, whose acks report a failure or that a stage did not acknowledge puts every "
                "admission and sleep field back and raises a record naming the stage (501 unsupported, else 500); "
                "a sleep of no stage changes nothing",
           upstream="sleep is all or nothing and fails on a failed ack"),
    Target(f"{_E}.async_omni", "AsyncOmni", "wake_up", "admission:make_wake_up", Kind.WRAP,
           {_R030: "6c6c8f0f59e8074b"}, upstreamed={_R030: "d0a32689e6bb93dd"},
           relies_on=_ADMISSION_FIELDS,
           process=Process.API_SERVER, hop=Hop.ADMISSION,
           does="the same for a wake-up; after a level-2 sleep, 501 naming the stage",
           upstream="wake-up is all or nothing and fails on a failed ack"),
    Target(f"{_E}.openai.api_server", None, "health", "admission:make_health", Kind.WRAP,
           {_R030: "88b0835c90d52907"}, upstreamed={_R030: "9d7bd24afd848573"},
           relies_on=("router", *(f"{_E}.async_omni:{name}" for name in _ADMISSION_FIELDS)),
           process=Process.API_SERVER, hop=Hop.ADMISSION,
           does="the route's endpoint: the same status (503 only for a dead engine, as vLLM's), and a paused or "
                "sleeping server says so: `status`, `is_sleeping`, `is_paused` (vLLM's keys), `stage_id`, `message`",
           upstream=_ADMISSION_UPSTREAM),
    Target(f"{_E}.openai.api_server", None, "_register_omni_exception_handlers", "api:make_register_handlers",
           Kind.WRAP, {_R030: "9f2feb929dbb14ea"}, upstreamed={_R030: "6ea7aa1cddd2f340"},
           defined_in=f"{_E}.serve.utils.errors:_register_omni_exception_handlers",
           process=Process.API_SERVER, hop=Hop.HTTP,
           does="the core's `omni_errors.server.vllm_api.install_api(app)` after vLLM-Omni's own registration "
                "(rebuilding Starlette's middleware stack), and the `InFlight` middleware the fatal stop waits "
                "on (a request the stopping server cancels is answered the fatal record, not uvicorn's bare 500); "
                "a route's "
                "`HTTPException(500, \"... failed: {exc}\")` raised while handling a record-carrying exception "
                "or vLLM's own client error (`VLLMClientError`: a `VLLMValidationError` naming its parameter) "
                "renders that exception; an `HTTPException`'s headers (`Allow`, `WWW-Authenticate`, `Retry-After`) "
                "are kept, a 405's `Allow` naming every method of its path, and a 503's `Retry-After` noted where "
                "it was raised (`AnswerHeaders`) reaches the client when a helper built the body; a route whose "
                "serving object was "
                "never built (`AttributeError` on `app.state`, or on `None` in the route's body) is 501 "
                "`NotImplementedError` naming the route, as vLLM 0.33 answers it; `/openapi.json` states the error "
                "contract (400, 413, 422, 500, 501 and 503 on every operation, 404 where the path names a resource, "
                "one `ErrorResponse` schema, no FastAPI 422); a body over `OMNI_ERRORS_MAX_BODY_BYTES` (512 MiB) "
                "is 413 before it is read",
           upstream="vLLM-Omni registers `omni_errors.server` handlers, routes stop wrapping"),
    Target(f"{_E}.openai.models.serving", "_DiffusionServingModels", "__getattr__",
           "serving_models:make_serving_models_getattr", Kind.GUARD, {_R030: "7059e10d21981df4"},
           upstreamed={_R030: "a4eebdb37594a851"},
           upstreamed_at=f"{_E}.openai.models.serving:_DiffusionServingModels.__init__",
           process=Process.API_SERVER, hop=Hop.HTTP,
           does="`lora_requests` is empty (a diffusion server loads no LoRA adapter), so vLLM's `_check_model` answers "
                "a model the server does not serve with its 404 `NotFoundError` naming the model, not a 500 quoting "
                "the private `_Unsupported` its fallback returns for every other attribute",
           upstream="the diffusion server's models object has vLLM's `lora_requests`, empty"),
    Target(f"{_E}.openai.api_server", None, "serve_http", "api:make_serve_http", Kind.WRAP,
           {_R030: "70a272d3d5d4ef37"},
           upstreamed={_R030: "2fdddd6e3d5be72a"}, upstreamed_at=f"{_E}.openai.api_server:serve_http",
           defined_in="vllm.entrypoints.launchers.launcher:serve_http",
           relies_on=("vllm.entrypoints.launchers.launcher:serve_http.app.state.server",),
           process=Process.API_SERVER, hop=Hop.EXIT,
           does="on a fatal failure the HTTP server first writes the answer of every request in flight (at most "
                "3 s), then keeps accepting 0.5 s (answering with the fatal record), then stops (0.5 s graceful), "
                "and the process exits with the documented code through `SystemExit` after every cleanup",
           upstream="the launcher exits non-zero when the engine died"),
    Target(f"{_E}.openai.api_server", None, "_create_engine_error_json_response", "api:make_engine_error_response",
           Kind.REPLACE, {_R030: "61f69074f28f2dbd"}, upstreamed={_R030: "c2b165cfd7a06d8a"},
           defined_in=f"{_E}.serve.utils.errors:_create_engine_error_json_response",
           process=Process.API_SERVER, hop=Hop.HTTP,
           does="renders the record (and starts the fatal shutdown)",
           upstream="routes raise; the handler renders"),
    Target(f"{_E}.openai.serving_chat", "OmniOpenAIServingChat", "_create_error_response",
           "api:make_chat_error_response", Kind.REPLACE, {_R030: "fb2977bc6a511dcd"},
           upstreamed={_R030: "a392b43c4db3d9e8"},
           in_except=(InExcept(f"{_E}.openai.serving_chat:OmniOpenAIServingChat._create_diffusion_chat_completion",
                               "_create_error_response"),),
           process=Process.API_SERVER, hop=Hop.HTTP,
           does="inside an `except`, builds the response from the record of the exception being handled: "
                "status, `code`, `type` agree, message sanitized",
           upstream="the diffusion chat route raises, or calls `create_error_response(exc)`"),
    Target(f"{_E}.openai.video.generation.helpers", None, "_video_error_from_exception", "api:make_video_error",
           Kind.REPLACE, {_R030: "a2fb14c8958d8eed"}, upstreamed={_R030: "550745ac6652f1e8"},
           relies_on=("VideoError.code", "VideoError.message"),
           process=Process.API_SERVER, hop=Hop.HTTP,
           does="stores the record's status and sanitized message",
           upstream="jobs store the record"),
    Target(f"{_C}.utils.serialization", "OmniSerde", "serialize", "connectors:make_serialize", Kind.GUARD,
           {_R030: "d7caae4715bdba86"}, upstreamed={_R030: "886e6f52e44507ca"},
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="a `Tombstone` (the record of a request its sender failed) is written as its bare frame, by "
                "every connector (all serialize through `OmniSerializer`)",
           upstream="`serialize` writes a `Tombstone` as its frame (`Tombstone.frame`)"),
    Target(f"{_C}.utils.serialization", "OmniSerde", "deserialize", "connectors:make_deserialize", Kind.GUARD,
           {_R030: "d5fb2b9da77d13bb"}, upstreamed={_R030: "395edae364bbb65d"},
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="a frame (first byte 0x4F, then `peek` on its 16-byte header) is read back as a `Tombstone`; "
                "msgpack payloads are untouched",
           upstream="`deserialize` reads a frame back as the `Tombstone` (`tombstone_from`)"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "recv_stage_payload", "connectors:make_recv_stage_payload", Kind.WRAP, {_R030: "7efac7af5bc0d50c"},
           upstreamed={_R030: "ac7b443d585fea78"},
           relies_on=("_OmniConnectorPayloadTransportMixin._broadcast_tp_payload_packet",),
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="the sync receiver (diffusion's `_maybe_recv_stage_payload`) raises `rebuild(record)` at the read "
                "that finds a tombstone, instead of waiting `retry_seconds` and failing as \"Stage payload "
                "unavailable\"",
           upstream="`recv_stage_payload` raises the record of a tombstone it reads (`Tombstone.error`)"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "_recv_ordinary_stage_result", "connectors:make_recv_ordinary_stage_result", Kind.WRAP,
           {_R030: "7e1ee131849338cb"}, upstreamed={_R030: "ad2b19147cf545f9"},
           upstreamed_at=f"{_C}.model_runner.omni_connector_payload_transport:{_TRANSPORT}._poll_single_request",
           relies_on=("_OmniConnectorPayloadTransportMixin._recv_full_payload_result",
                      "_OmniConnectorPayloadTransportMixin._recv_async_chunk_result"),
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="the poller's connector read hands a tombstone to `_poll_single_request` as an exception",
           upstream="`_poll_single_request` reads the tombstone this read returns; the read is unchanged"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "_poll_single_request", "connectors:make_poll_single_request", Kind.WRAP, {_R030: "c5dc10f43b629749"},
           upstreamed={_R030: "ad2b19147cf545f9"},
           relies_on=("_OmniConnectorPayloadTransportMixin._lock",
                      "_OmniConnectorPayloadTransportMixin._pending_load_reqs"),
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="the async poller stops polling a request whose sender failed and keeps its record "
                "(`connectors.failed_requests`)",
           upstream="`_poll_single_request` stops waiting for a request whose tombstone it reads and keeps its record "
                    "(`_failed_load_reqs`)"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "_requeue_or_drop_failed_send", "connectors:make_requeue_or_drop_failed_send", Kind.WRAP,
           {_R030: "cccbcb15b4ff0bb0"}, upstreamed={_R030: "bfb38fa8db11bdec"},
           relies_on=("_OmniConnectorPayloadTransportMixin._MAX_SEND_RETRIES",
                      "_OmniConnectorPayloadTransportMixin._omni_connector",
                      "_OmniConnectorPayloadTransportMixin._stage_id"),
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="a send given up after its retries also puts a tombstone (server 500, the sender's `stage_id`) "
                "under the key it could not fill",
           upstream="the give-up branch puts a tombstone (`Tombstone.of`) under the key it could not fill"),
    Target(f"{_C}.model_runner.omni_connector_payload_transport", "_OmniConnectorPayloadTransportMixin",
           "cleanup_finished_request", "connectors:make_cleanup_finished_request", Kind.WRAP,
           {_R030: "a8ef47b22658016e"}, upstreamed={_R030: "30970a46fa37aef4"},
           defined_in=f"{_C}.model_runner.omni_connector_runtime:_OmniConnectorRuntimeMixin.cleanup_finished_request",
           process=Process.WORKER, hop=Hop.CONNECTORS,
           does="a finished request's kept record goes with the rest of its connector state",
           upstream="`cleanup_finished_request` drops the request's entry in `_failed_load_reqs`"),
    Target("zmq", "Socket", "bind", "sockets:make_bind", Kind.WRAP, {}, public=True,
           defined_in="zmq.sugar.socket:Socket.bind",
           process=Process.EVERY, hop=Hop.SOCKETS,
           does="with `OMNI_ERRORS_VLLM_OMNI_KEYS`, a TCP bind is a CURVE server behind a ZAP allow-list (else a "
                "warning that the deployment is plaintext); an expected stage link gets heartbeats and a monitor",
           upstream="vLLM-Omni secures its multi-node sockets"),
    Target("zmq", "Socket", "connect", "sockets:make_connect", Kind.WRAP, {}, public=True,
           defined_in="zmq.sugar.socket:Socket.connect",
           process=Process.EVERY, hop=Hop.SOCKETS,
           does="with `OMNI_ERRORS_VLLM_OMNI_KEYS`, a TCP connect is a CURVE client that authenticates the head; "
                "an expected stage link gets heartbeats and a monitor",
           upstream="vLLM-Omni secures its multi-node sockets"),
    Target("zmq", "Context", "term", "sockets:make_term", Kind.WRAP, {}, public=True,
           defined_in="zmq.sugar.context:Context.term",
           process=Process.EVERY, hop=Hop.SOCKETS,
           does="a context's ZAP handler stops before the context terminates (its socket would hold `term`)",
           upstream="vLLM-Omni secures its multi-node sockets"),
    Target("zmq", "Context", "destroy", "sockets:make_destroy", Kind.WRAP, {}, public=True,
           defined_in="zmq.sugar.context:Context.destroy",
           process=Process.EVERY, hop=Hop.SOCKETS,
           does="a context's ZAP handler stops before `destroy` closes every socket of the context",
           upstream="vLLM-Omni secures its multi-node sockets"),
)
# fmt: on


def targets_by_module() -> dict[str, list[Target]]:
    """The targets grouped by the module whose import applies them, in manifest order."""
    grouped: dict[str, list[Target]] = {}
    for target in TARGETS:
        grouped.setdefault(target.module, []).append(target)
    return grouped


_TABLE_BEGIN = "<!-- patch table: generated from omni_errors_vllm_omni/manifest.py by `render_table()`; "
_TABLE_END = "<!-- end of the generated patch table -->"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_table() -> str:
    """The patch table of docs/vllm-omni.md (Markdown): one table per process, in `Process` order, one
    row per target, in manifest order."""
    lines = [_TABLE_BEGIN + "tests/vllm_omni/test_manifest_doc.py fails when it drifts -->"]
    for process in Process:
        targets = [t for t in TARGETS if t.process is process]
        if not targets:
            continue
        lines += [
            "",
            f"### {process.value[0].upper()}{process.value[1:]}",
            "",
            "| hop | patched | kind | relies on | what the patch does | upstream change that replaces it |",
            "|---|---|---|---|---|---|",
        ]
        for target in targets:
            relies = [f"`{r.partition(':')[2] or r}`" for r in target.relies_on] + [str(c) for c in target.in_except]
            where = f"`{target.module}.{target.qualname}`"
            kind = f"{target.kind.value} (public API)" if target.public else target.kind.value
            lines.append(
                f"| {target.hop.value} | {where} | {kind} | {_cell(', '.join(relies) or '-')} "
                f"| {_cell(target.does)} | {_cell(target.upstream)} |"
            )
    lines += ["", _TABLE_END]
    return "\n".join(lines) + "\n"
