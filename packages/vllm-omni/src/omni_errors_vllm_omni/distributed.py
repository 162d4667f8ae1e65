"""vLLM-Omni's multi-node mode: what the head does when a stage loses its remote replicas.

vLLM-Omni lets a replica re-register and restore service, so the single-host rule (a stage with no
live replica left ends the pipeline) would end a head that could have recovered. For a stage
whose replicas are remote (a head started with `--omni-master-address`), the plugin decides:

1. Requests in flight on a lost replica are answered at once (`orchestrator`), each with a record
   that keeps its `request_id` and `stage_id`.
2. A stage left without a live replica opens a rejoin window (`omni_errors.server.rejoin`,
   `OMNI_ERRORS_REJOIN_WINDOW_S`, default 120 s): a new request gets 503 `ServiceUnavailableError`
   at once, with `Retry-After` the short hint (`omni_errors.render.http.RETRY_AFTER_S`, never past the
   window's end; the message says when the window ends), and the head's `/health` is 503
   (vLLM-Omni's own check).
3. A replica that registers within the window restores service, without a restart.
4. When the window passes, the pipeline ends like any fatal failure (`orchestrator.fail_pipeline`):
   the exit code follows the one fatal policy (`omni_errors.fatal.policy.PRECEDENCE`) over the failures
   the head saw: 81 when a replica ran out of memory, 80 when one reported a fatal failure, 86 when
   one was lost without a record (killed, or cut off), so the platform's restart policy takes over.

The windows are the core's (`omni_errors.server.rejoin`: process-wide, the orchestrator's thread
opens and closes them, the API's loop reads them); this module holds the patches of vLLM-Omni's
membership and dispatch code that open, close and read them where vLLM-Omni does not yet.
"""

from __future__ import annotations

import logging
from multiprocessing import connection
from types import ModuleType
from typing import Any

from omni_errors.fatal import process as fatal
from omni_errors.fatal.exitcodes import stage_exit_code
from omni_errors.server.rejoin import rejoin, unavailable_answer

from omni_errors_vllm_omni.settings import LOG_NAME

__all__ = [
    "COORDINATOR_HEARTBEAT_S",
    "REAP_TIMEOUT_S",
    "REGISTRATION_POLL_MS",
    "activate",
    "active",
    "make_do_register",
    "make_fail_request_dead_stage",
    "make_headless_replica_group",
    "make_heartbeat_loop",
    "make_membership_start",
    "make_pick",
    "make_registration_poll",
    "make_wait_for_diffusion_replicas",
]

_log = logging.getLogger(LOG_NAME)

#: The launcher reaps its replica this long at most before it reads the exit code.
REAP_TIMEOUT_S = 5.0
#: How often the registration server checks whether it must stop (vLLM-Omni: every 5 s, which a
#: head's shutdown waited for).
REGISTRATION_POLL_MS = 100
#: How often a stage tells the coordinator it is up (vLLM-Omni: every 5 s, hard-coded, so an
#: `--omni-heartbeat-timeout` under 5 s detached healthy replicas).
COORDINATOR_HEARTBEAT_S = 1.0


def activate() -> None:
    """This process is the head of a multi-node deployment (its membership controller started): a
    fatal record answered to a client no longer ends it; a stage's lost replicas do."""
    fatal.defer_to_stages()


def active() -> bool:
    """Whether the lost-replica policy above decides here, rather than the single-host rule."""
    return fatal.stages_decide()


# -- patches --------------------------------------------------------------------------------------


def make_membership_start(module: ModuleType, original: Any) -> Any:
    """`MembershipController.start`: the head of a multi-node deployment follows this module's policy."""

    def start(self: Any) -> Any:
        activate()
        return original(self)

    return start


def make_do_register(module: ModuleType, original: Any) -> Any:
    """`MembershipController._do_register`: a replica that attaches ends its stage's outage."""

    async def _do_register(self: Any, stage_id: int, replica_id: int) -> Any:
        input_addr = await original(self, stage_id, replica_id)
        if input_addr is not None:
            rejoin().close(stage_id)
        return input_addr

    return _do_register


def make_pick(module: ModuleType, original: Any) -> Any:
    """`StagePool.pick`: a stage in an outage refuses at once instead of polling 10 s for a replica."""
    unavailable = module.StageUnavailableError

    async def pick(self: Any, request_id: str, *args: Any, **kwargs: Any) -> Any:
        outage = rejoin().outage(self.stage_id)
        if outage is not None:
            raise unavailable(f"stage {self.stage_id} has no live replica (rejoin window)")
        return await original(self, request_id, *args, **kwargs)

    return pick


def make_fail_request_dead_stage(module: ModuleType, original: Any) -> Any:
    """`OrchestratorBase._fail_request_dead_stage`: in multi-node mode a stage without replicas is not fatal:
    the request gets 503 (its stage may get a replica back). vLLM-Omni also calls it for a request
    sent to a replica that just died while its stage has another: that one is a lost replica's 503
    (`records.stage_serves_on`), not a fatal answer."""
    from omni_errors_vllm_omni.records import error_message_class, other_replica_lives, stage_serves_on

    async def _fail_request_dead_stage(self: Any, req_id: str, stage_id: int) -> None:
        pool = self.stage_pools[stage_id]
        if not (active() and pool.is_distributed):
            with stage_serves_on(other_replica_lives(pool, pool.get_bound_replica_id(req_id))):
                await original(self, req_id, stage_id)
            return
        await self.output_async_queue.put(error_message_class().of(unavailable_answer(stage_id, req_id)))
        await self._cleanup_request_ids(
            [req_id, *self._cfg_tracker.cleanup_parent(req_id)], abort=True, release_owners=True
        )

    return _fail_request_dead_stage


def make_heartbeat_loop(module: ModuleType, original: Any) -> Any:
    """`OmniCoordClientForStage._heartbeat_loop`: a heartbeat every second, so that any coordinator
    timeout from 2 s up keeps healthy replicas attached (the timeout stays vLLM-Omni's to set)."""

    def _heartbeat_loop(self: Any) -> None:
        self._heartbeat_interval = min(self._heartbeat_interval, COORDINATOR_HEARTBEAT_S)
        original(self)

    return _heartbeat_loop


def make_registration_poll(module: ModuleType, original: int) -> int:
    """`stage_engine_startup._POLL_PERIOD_MS`: the registration server notices its stop within 0.1 s."""
    return min(int(original), REGISTRATION_POLL_MS)


def make_wait_for_diffusion_replicas(module: ModuleType, original: Any) -> Any:
    """`wait_for_diffusion_manager_liveness` (the headless launcher): the replica is reaped before its exit
    code is read (vLLM-Omni reads it first, and exits 0 or 1 at random), and the launcher ends with it."""

    def wait_for_diffusion_manager_liveness(managers: list[Any]) -> None:
        _end_with_the_first([manager.proc for manager in managers], "diffusion")

    return wait_for_diffusion_manager_liveness


def make_headless_replica_group(module: ModuleType, original: Any) -> Any:
    """`launch_headless_replica_group`: an LLM stage's launcher, which waits with vLLM-Omni's default
    (`wait_for_manager_liveness`, then exit 0), ends with its replica's code too."""

    def launch_headless_replica_group(*, wait_for_replicas: Any = None, **kwargs: Any) -> None:
        original(wait_for_replicas=wait_for_replicas or _wait_for_llm_replicas, **kwargs)

    return launch_headless_replica_group


def _wait_for_llm_replicas(managers: list[Any]) -> None:
    _end_with_the_first([proc for manager in managers for proc in manager.processes], "LLM")


def _end_with_the_first(procs: list[Any], kind: str) -> None:
    """Wait for the first of a launcher's replica processes to end, reap it, and end the launcher
    with its code (a replica that exited 0 was stopped: the launcher returns)."""
    by_sentinel = {proc.sentinel: proc for proc in procs}
    first = by_sentinel[connection.wait(list(by_sentinel))[0]]
    first.join(REAP_TIMEOUT_S)
    code = first.exitcode
    _log.info("omni-errors: headless %s replica %s exited (code=%s)", kind, first.name, code)
    if code is None or code == 0:
        return
    ended = stage_exit_code(code)
    _log.error("omni-errors: the headless launcher exits with %d, as its replica ended", ended)
    raise SystemExit(ended)
