"""The targets whose patched code runs in the API server (`vllm-omni serve`: the HTTP routes,
`AsyncOmni`, the orchestrator thread, its stage clients and the multi-node head), in the order they
apply.
"""

from __future__ import annotations

from omni_errors_vllm_omni.manifest.model import Hop, InExcept, Kind, Process, Target
from omni_errors_vllm_omni.manifest.names import (
    ADMISSION_FIELDS as _ADMISSION_FIELDS,
    ADMISSION_UPSTREAM as _ADMISSION_UPSTREAM,
    DIFFUSION as _D,
    ENGINE_CORE_CLIENT as _SC,
    ENGINE_LINKS_UPSTREAM as _ENGINE_LINKS_UPSTREAM,
    ENTRYPOINTS as _E,
    LIVENESS_UPSTREAM as _LIVENESS_UPSTREAM,
    MEMBERSHIP_CONTROLLER as _M,
    REJOIN_UPSTREAM as _REJOIN_UPSTREAM,
    RELEASE as _R030,
    RELEASE_BEFORE_32 as _R030_BEFORE_32,
    RELEASE_BEFORE_33 as _R030_BEFORE_33,
    SERIES as _S030,
    SERIES_23_TO_28 as _S030_23,
)

__all__ = ["TARGETS"]

# fmt: off
TARGETS: tuple[Target, ...] = (
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
    Target(f"{_E}.openai.video.generation.helpers", None, "_video_error_from_exception",
           "video_jobs:make_video_error", Kind.REPLACE, {_R030: "a2fb14c8958d8eed"},
           upstreamed={_R030: "550745ac6652f1e8"},
           relies_on=("VideoError.code", "VideoError.message"),
           process=Process.API_SERVER, hop=Hop.HTTP,
           does="stores the whole record: its status and sanitized message in `code` and `message`, and its "
                "`type`, `param`, `request_id`, `stage_id` beside them (a `VideoError` with the record's fields)",
           upstream="jobs store the record"),
    Target(f"{_E}.openai.api_server", None, "retrieve_video", "video_jobs:make_retrieve_video", Kind.GUARD,
           {_R030: "10d7c239628198dd"}, upstreamed={_R030: "67de06b28e8d8f87"},
           relies_on=("router", "VIDEO_STORE", "VideoGenerationStatus.FAILED"),
           process=Process.API_SERVER, hop=Hop.HTTP,
           does="the route's endpoint: a failed job's metadata is 200 with the video object, its `error` the whole "
                "stored record (vLLM-Omni answered the stored status, with a body no schema declared), and "
                "`/openapi.json` declares that 200 as `VideoResponse`, whose `VideoError` has the record's fields",
           upstream="a failed job's metadata is 200 with its record embedded (docs/errors.md, async jobs)"),
    Target(f"{_E}.openai.api_server", None, "download_video", "video_jobs:make_download_video", Kind.GUARD,
           {_R030: "a6cbab7a3d25db69"}, upstreamed={_R030: "deea2c12f7323388"},
           relies_on=("router", "VIDEO_STORE", "VideoGenerationStatus.FAILED"),
           process=Process.API_SERVER, hop=Hop.HTTP,
           does="the route's endpoint: a failed job's content answers its stored record, status and envelope "
                "(vLLM-Omni answered 422 whatever the failure)",
           upstream="a failed job's content answers its stored record (docs/errors.md, async jobs)"),
)
# fmt: on
