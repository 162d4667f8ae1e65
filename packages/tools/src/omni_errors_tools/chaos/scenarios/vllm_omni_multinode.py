"""vLLM-Omni's multi-node mode: a head and a `--headless` stage (target `vllm-omni`, same table).

Each run starts `omni_errors_tools.chaos.multinode`: the head of a one-stage pipeline, whose stage 0 is
remote-only, and one remote stage that registers with it. Both run on this machine's loopback,
as two hosts would; faults are the fake engine's prompt markers, `freeze` standing for a cut (the
remote proc stops and says nothing on any link). Every scenario runs with the plugin off
(baseline) and on. The rejoin window is short (`_WINDOW_S`) so that a lost stage ends its head
quickly, except for `mn-rejoin`, where a second remote stage registers after the first died.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass
from typing import Any

from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.chaos.loadgen import Outcome
from omni_errors_tools.chaos.scenario import ANY, Call, Ctx, Expect, Load, Scenario, expect
from omni_errors_tools.chaos.scenarios.vllm_omni import MODEL, environment, image_call, model_dir, off_and_on
from omni_errors_tools.chaos.target import Launch, ServerCommand

__all__ = ["SCENARIOS", "MultinodeTarget"]

_WINDOW_S = 5.0
_REJOIN_WINDOW_S = 600.0  # a new remote stage takes minutes to start on a loaded machine
_REJOIN_DEADLINE_S = 600.0
_EXIT_DEADLINE = 30.0  # the window, then the head's own bounded shutdown; Ctrl+C after that


@dataclass(frozen=True)
class MultinodeTarget:
    """A head and one remote stage (`omni_errors_tools.chaos.multinode`), the plugin on or off at both."""

    plugin: bool
    window: float = _WINDOW_S
    rejoin: bool = False
    name: str = "vllm-omni"  # the same run, table and plot as the single-host scenarios
    health_path: str = "/health"

    def command(self, launch: Launch) -> ServerCommand:
        model = model_dir(launch.fault_marker.parent)
        rejoin = ["--rejoin"] if self.rejoin else []
        env = environment(plugin=self.plugin, fault_marker=launch.fault_marker)
        env["OMNI_ERRORS_REJOIN_WINDOW_S"] = str(self.window)
        return ServerCommand(
            [launch.python, "-m", "omni_errors_tools.chaos.multinode", *rejoin, str(model), "--",
             "--host", launch.host, "--port", str(launch.port), "--served-model-name", MODEL],
            env=env,
        )  # fmt: skip


# A request in flight on the lost replica gets 500 (stage 0); one that reaches the stage after the
# loss gets 503 while the window is open; one served before the fault, 200.
_LOST = expect(("ok", 200, None), ("error", 500, 0), ("error", 503, 0))
_FAILED = expect(("error", 500, ANY))


def _lost_among(fault: str, full: int) -> Load:
    """One request with `fault` first, then `full` (scaled) more behind it."""

    def load(ctx: Ctx) -> list[tuple[Call, Expect]]:
        calls = [(image_call(ctx, fault, 0), _FAILED)]
        return calls + [(image_call(ctx, "slow" if i == 1 else None, i), _LOST) for i in range(1, ctx.n(full))]

    return load


def _served_again(ctx: Ctx) -> Call:
    """A request repeated until the stage serves again (503 while no replica is back)."""

    async def call() -> Outcome:
        deadline = time.monotonic() + _REJOIN_DEADLINE_S
        while True:
            outcome = await image_call(ctx, None, 1)()
            if outcome.result == "ok" or time.monotonic() >= deadline:
                return outcome
            await asyncio.sleep(1.0)

    return call


def _rejoin(ctx: Ctx) -> list[tuple[Call, Expect]]:
    return [(image_call(ctx, "die", 0), _FAILED), (_served_again(ctx), expect(("ok", 200, None)))]


def _hold(ctx: Ctx) -> list[tuple[Call, Expect]]:
    return [(image_call(ctx, "hold", 0), expect(("ok", 200, None), ("error", 500, ANY), ("lost", 0, None)))]


def _both(name: str, title: str, expect_exit: int, load: Load, *, window: float = _WINDOW_S, rejoin: bool = False,
          **kw: Any) -> list[Scenario]:  # fmt: skip
    def target(plugin: bool) -> MultinodeTarget:
        return MultinodeTarget(plugin, window, rejoin)

    return off_and_on(name, f"multi-node: {title}", target, expect_exit, load, **kw)


SCENARIOS: list[Scenario] = [
    *_both(
        "mn-killed",
        "the remote stage's proc is SIGKILLed, requests in flight; no replica returns",
        ExitCode.LINK_LOST,
        _lost_among("die", 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "mn-cut",
        "the remote stage falls silent (a cut), requests in flight; no replica returns",
        ExitCode.LINK_LOST,
        _lost_among("freeze", 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "mn-fatal",
        "seed 001 on the remote stage: its executor dies",
        ExitCode.FATAL_ENGINE,
        _lost_among("fatal", 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "mn-oom",
        "seed 003 on the remote stage: torch.OutOfMemoryError",
        ExitCode.OOM,
        _lost_among("oom", 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "mn-rejoin",
        "the remote stage's proc is SIGKILLed and a new one registers",
        0,
        _rejoin,
        window=_REJOIN_WINDOW_S,
        rejoin=True,
        stop_after_load=signal.SIGINT,
        deadline=_REJOIN_DEADLINE_S,
    ),
    *_both("mn-ctrl-c", "Ctrl+C on the head while the remote stage is busy", 0, _hold, sigint_after_fault=0.5),
]
