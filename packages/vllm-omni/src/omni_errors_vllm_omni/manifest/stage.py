"""The targets whose patched code runs in a stage's own process (`StageDiffusionProc`, an LLM stage's
`StageEngineCoreProc`), in the order they apply.
"""

from __future__ import annotations

from omni_errors_vllm_omni.manifest.model import Hop, InExcept, Kind, Process, Target
from omni_errors_vllm_omni.manifest.names import (
    COORDINATOR_CLIENT as _COORD_CLIENT,
    DIFFUSION as _D,
    ENGINE_CORE_PROC as _SP,
    ENGINE_LINKS_UPSTREAM as _ENGINE_LINKS_UPSTREAM,
    RELEASE as _R030,
    RELEASE_BEFORE_25 as _R030_BEFORE_25,
    RELEASE_BEFORE_33 as _R030_BEFORE_33,
    RELEASE_BEFORE_35 as _R030_BEFORE_35,
    SERIES as _S030,
)

__all__ = ["TARGETS"]

# fmt: off
TARGETS: tuple[Target, ...] = (
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
    Target(_COORD_CLIENT, "OmniCoordClientForStage",
           "_heartbeat_loop", "distributed:make_heartbeat_loop", Kind.WRAP, {_R030: "2d15fbec07fb0680"},
           upstreamed={_R030: "07362d7dbbd96adf"},
           upstreamed_at=f"{_COORD_CLIENT}:OmniCoordClientForStage.__init__",
           relies_on=("OmniCoordClientForStage._heartbeat_interval",),
           process=Process.STAGE, hop=Hop.MEMBERSHIP,
           does="a stage heartbeats the coordinator every second instead of every 5 s, so that an "
                "`--omni-heartbeat-timeout` under 5 s no longer detaches healthy replicas",
           upstream="the stage's heartbeat interval follows the coordinator's timeout"),
)
# fmt: on
