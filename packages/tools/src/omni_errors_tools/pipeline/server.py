"""`omni-errors serve`: start the stages, then uvicorn; exit with the pipeline's exit code.

Order of events, as vLLM's API server does it: the command binds the listening socket first (a taken
port exits 87 at once, not after the stages' start; connections wait in its backlog meanwhile); the
stages start (a startup failure exits 82 before anything is served); then uvicorn serves. When the
pipeline dies, the supervisor has already answered every in-flight request; its dead callback tells
uvicorn to stop, `/health` answers 503 until the listener closes, and the process exits non-zero
through normal interpreter shutdown. SIGINT stops at once (in-flight requests get 503, exit 130);
SIGTERM drains first (exit 143); a second SIGINT kills the stages and uvicorn's remaining
connections.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import logging
import socket
import threading
from dataclasses import dataclass, field
from types import FrameType

import uvicorn
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.render.http import RETRY_AFTER_S
from omni_errors_tools.lifecycle import LifecycleConfig, StageStartupError, Supervisor
from omni_errors_tools.lifecycle.remote.config import LinkConfig, LinkConfigError
from omni_errors_tools.lifecycle.state import State
from omni_errors_tools.pipeline.schemas import Limits
from omni_errors_tools.pipeline.service import STAGE_NAMES, PipelineConfig, Service

__all__ = ["ServeConfig", "serve"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8000
    log_level: str = "info"
    limits: Limits = field(default_factory=Limits)
    retry_after_s: int = RETRY_AFTER_S  # a 503's Retry-After when the failure does not say
    pipeline: PipelineConfig = field(default_factory=PipelineConfig)
    lifecycle: LifecycleConfig = field(default_factory=LifecycleConfig)
    link: LinkConfig | None = None  # where remote stages join (PipelineConfig.remote names them)


class _Uvicorn(uvicorn.Server):
    """uvicorn whose signals go to the supervisor first (so in-flight requests are answered),
    and which does not re-raise the signal after serving (the exit code says how it ended)."""

    def __init__(self, config: uvicorn.Config, supervisor: Supervisor, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(config)
        self._supervisor = supervisor
        self._loop = loop
        self._signals = 0

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._signals += 1
        self._loop.call_soon_threadsafe(self._supervisor.handle_signal, sig)
        self.should_exit = True  # stop accepting connections; in-flight ones finish or get 503
        if self._signals > 1:
            self.force_exit = True


async def serve(cfg: ServeConfig, sock: socket.socket | None = None) -> ExitCode:
    """Run until the pipeline stops; returns the process exit code."""
    loop = asyncio.get_running_loop()
    service = Service(cfg.pipeline, cfg.lifecycle, cfg.link)
    sup = service.supervisor
    sup.install_signal_handlers()  # until uvicorn installs its own, which call the same entry point
    remote = cfg.pipeline.remote
    local = [name for name in STAGE_NAMES if name not in remote]
    logger.info("starting stages %s (step interval %.3fs)", ", ".join(local) or "-", cfg.pipeline.step_interval)
    if remote and cfg.link is not None:
        logger.info("waiting for remote stage(s) %s on %s", ", ".join(remote), cfg.link.endpoint)
    try:
        # Import the API layer (vLLM, FastAPI) while the stages load their models in parallel.
        app_import = _import_in_background("omni_errors_tools.pipeline.app")
        await sup.start()
        await asyncio.wrap_future(app_import)
    except StageStartupError as exc:
        logger.critical(
            "pipeline failed to start: stage %s (%s): %s",
            exc.details.stage_id,
            _stage_name(exc.details.stage_id),
            exc.reason,
        )
        return sup.exit_code or exc.exit_code
    except LinkConfigError as exc:  # e.g. the link address is taken or not on this host
        logger.critical("pipeline failed to start: %s", exc)
        return ExitCode.STARTUP_FAILURE
    finally:
        if not sup.health().ok:  # else they stay until uvicorn's take over: Ctrl+C stays a clean stop
            sup.remove_signal_handlers()
    if not sup.health().ok:
        await sup.wait_dead()
        return sup.exit_code
    logger.info("stages ready (pids %s); serving on http://%s:%d", sup.pids, cfg.host, cfg.port)
    from omni_errors_tools.pipeline.app import build_app

    app = build_app(service, cfg.limits, retry_after_s=cfg.retry_after_s)
    config = uvicorn.Config(
        app,
        host=cfg.host,
        port=cfg.port,
        log_level=cfg.log_level,
        ws="websockets-sansio",
        lifespan="off",
        timeout_graceful_shutdown=int(cfg.lifecycle.drain_timeout) + 5,
        access_log=cfg.log_level == "debug",
    )
    server = _Uvicorn(config, sup, loop)
    sup.add_dead_callback(lambda: setattr(server, "should_exit", True))
    sup.remove_signal_handlers()  # uvicorn's own from here on (`serve` installs them first thing)
    if sup.health().ok:  # else a signal or a failure came while the app was built
        await server.serve(sockets=[sock] if sock is not None else None)
    if sup.health().state in (State.RUNNING, State.STARTING):
        await sup.shutdown(exit_code=ExitCode.OK)
    await sup.wait_dead()
    code = sup.exit_code
    error = sup.dead_error
    if error is not None:
        logger.critical(
            "exiting with code %d (%s): stage %s (%s) failed",
            code,
            code.name.lower(),
            error.stage_id,
            _stage_name(error.stage_id),
        )
    else:
        logger.info("exiting with code %d", code)
    return code


def _import_in_background(module: str) -> concurrent.futures.Future[None]:
    """Import `module` on a daemon thread: a startup failure then exits without waiting for it."""
    future: concurrent.futures.Future[None] = concurrent.futures.Future()

    def run() -> None:
        try:
            importlib.import_module(module)
            future.set_result(None)
        except BaseException as exc:  # omni-errors: ignore[OE202]: handed to the future's waiter
            future.set_exception(exc)

    threading.Thread(target=run, name="import-api", daemon=True).start()
    return future


def _stage_name(stage_id: int | None) -> str:
    return STAGE_NAMES[stage_id] if stage_id is not None and 0 <= stage_id < len(STAGE_NAMES) else "-"
