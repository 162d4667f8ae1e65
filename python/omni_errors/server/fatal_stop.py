"""A vLLM API server that a fatal failure stops, answering first, and whose process then exits with
the failure's documented code.

`stop_on_fatal(serve_http)` wraps vLLM's launcher (`vllm.entrypoints.launchers.launcher.serve_http`,
which puts its uvicorn server on `app.state.server` and returns the task of its shutdown). On the
process's first fatal failure (`omni_errors.fatal.process`) the server first writes the answer of
every request in flight (`InFlight`, at most `ANSWER_DEADLINE_S`), then gives what is on its way a
last call (`LAST_CALL_S`), then stops, closing what is left after `GRACEFUL_SHUTDOWN_S`; once it
has shut down the process exits with the fatal exit code (`SystemExit`, so every cleanup still
runs). A stop that is not fatal (Ctrl+C, SIGTERM) exits as before, within the same bound.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from omni_errors._native import OmniErrorDetails
from omni_errors.fatal import process as fatal
from omni_errors.server.in_flight import InFlight
from omni_errors.settings import ANSWER_DEADLINE

__all__ = ["ANSWER_DEADLINE_S", "GRACEFUL_SHUTDOWN_S", "LAST_CALL_S", "stop_on_fatal"]

_log = logging.getLogger(__name__)

#: Once the server stops (a fatal failure, Ctrl+C, SIGTERM), in-flight responses get this long to
#: finish before it closes them: uvicorn would otherwise wait for them without a deadline, and a
#: request whose pipeline has stopped never finishes (Ctrl+C must end the server within 3 s).
GRACEFUL_SHUTDOWN_S = 0.5
#: ...and the server keeps accepting for this long first, answering what arrives with the fatal
#: record, so that a request already on its way gets an answer instead of a dropped connection.
LAST_CALL_S = 0.5
#: Before that last call, every request in flight when the pipeline ended is answered from the
#: record (the orchestrator has queued its answer): the stop waits until the server has written
#: them all, for at most this long (`settings.ANSWER_DEADLINE`, 3 s), so that none is left for uvicorn
#: to cancel with a bare 500.
ANSWER_DEADLINE_S = ANSWER_DEADLINE.read()

ServeHttp = Callable[..., Awaitable[Any]]
_tasks: set[asyncio.Task[None]] = set()  # the stop tasks, kept alive until they finish


def stop_on_fatal(serve_http: ServeHttp) -> ServeHttp:
    """`serve_http`, stopped by the process's first fatal failure (see the module docstring)."""

    async def serve(app: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()

        async def answer_then_stop() -> None:
            # Every request in flight has its answer queued: let the server write them all, then
            # give what is on its way the last call, then stop (still bounded by the deadline).
            deadline = loop.time() + ANSWER_DEADLINE_S
            if not await InFlight.drained(deadline):
                _log.error("omni-errors: %d request(s) still unanswered after the fatal failure", InFlight.count)
            await asyncio.sleep(LAST_CALL_S)
            await InFlight.drained(deadline + LAST_CALL_S)
            server = getattr(app.state, "server", None)
            if server is not None:
                server.should_exit = True

        def start_stop() -> None:
            task = loop.create_task(answer_then_stop())
            _tasks.add(task)
            task.add_done_callback(_tasks.discard)

        def stop(_details: OmniErrorDetails) -> None:
            loop.call_soon_threadsafe(start_stop)

        def bound_graceful_shutdown() -> None:  # runs once serve_http has created the server
            server = getattr(app.state, "server", None)
            if server is not None:
                server.config.timeout_graceful_shutdown = GRACEFUL_SHUTDOWN_S

        fatal.on_fatal(stop)
        loop.call_soon(bound_graceful_shutdown)
        return _exit_after(await serve_http(app, *args, **kwargs))

    return serve


async def _exit_after(shutdown: Awaitable[Any]) -> None:
    """Await the server's own shutdown, then end the process with the fatal exit code, if any."""
    await shutdown
    # Only a pipeline that ended exits with its code; a code merely noted (a multi-node replica lost
    # and replaced, say) does not turn a Ctrl+C into a failure.
    code = fatal.exit_code() if fatal.declared() is not None else None
    if code is not None:
        _log.critical("omni-errors: server stopped after a fatal stage failure; exiting with %d", code)
        raise SystemExit(code)
