"""vLLM-Omni's scenarios (`vllm-omni serve MODEL --omni`, target `vllm-omni`), each run twice.

Every scenario exists as `NAME-off` (the plugin disabled: vLLM-Omni 0.30 as released, the
"before" column) and `NAME-on` (the plugin enabled). Both expect the fixed behaviour, so the
`-off` rows show what is wrong today and are baselines: they never fail the command.

The server is the real one on CPU: a model folder that holds only `model_index.json` (and the
VAE config its post-processing reads), and the test plugin `omni_errors_fake_diffusion`
(tests/vllm_omni/fake_diffusion, installed by `make build-omni`) running vLLM-Omni's own
`DiffusionEngine` over a CPU executor. Faults are `[fault:NAME]` markers in the prompt.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_errors.fatal.exitcodes import ExitCode
from omni_errors_tools.chaos.loadgen import http_call
from omni_errors_tools.chaos.scenario import ANY, Call, Ctx, Expect, Load, Scenario, expect
from omni_errors_tools.chaos.target import Launch, ServerCommand, Target

__all__ = ["CPU_ONLY", "MODEL", "SCENARIOS", "VllmOmniTarget", "environment", "image_call", "model_dir", "off_and_on"]

_MODEL_INDEX = {"_class_name": "StableDiffusion3Pipeline"}
_VAE_CONFIG = {"block_out_channels": [128, 256, 512, 512]}


def model_dir(parent: Path) -> Path:
    """A model folder vLLM-Omni accepts without weights (written under `parent`)."""
    model = parent / "model"
    (model / "vae").mkdir(parents=True, exist_ok=True)
    (model / "model_index.json").write_text(json.dumps(_MODEL_INDEX))
    (model / "vae" / "config.json").write_text(json.dumps(_VAE_CONFIG))
    return model


#: What a process importing vLLM on a machine without a GPU skips: vLLM's kernel package `humming`
#: starts two Python processes at import that build CUDA kernels in the background (each imports
#: torch: seconds of CPU per vLLM process, for nothing on a CPU).
CPU_ONLY = {"HUMMING_DISABLE_PARALLEL_BUILD": "1"}


def environment(*, plugin: bool, fault_marker: Path, subprocess: bool = False) -> dict[str, str]:
    """The environment of a CPU test server: the plugin on or off, the fake engine and its faults, offline."""
    return {
        "OMNI_ERRORS_VLLM_OMNI": "1" if plugin else "0",
        "OMNI_FAKE_DIFFUSION": "1",
        "OMNI_FAKE_DIFFUSION_MODE": "subprocess" if subprocess else "inline",
        "OMNI_FAKE_DIFFUSION_MARKER": str(fault_marker),
        "VLLM_TARGET_DEVICE": "cpu",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "VLLM_LOGGING_COLOR": "0",
        **CPU_ONLY,
    }


@dataclass(frozen=True)
class VllmOmniTarget:
    """`vllm-omni serve MODEL --omni` from the interpreter's environment, plugin on or off."""

    plugin: bool
    subprocess: bool = False
    name: str = "vllm-omni"
    health_path: str = "/health"

    def command(self, launch: Launch) -> ServerCommand:
        model = model_dir(launch.fault_marker.parent)
        binary = Path(launch.python).with_name("vllm-omni")
        return ServerCommand(
            [
                str(binary),
                "serve",
                str(model),
                "--omni",
                "--host",
                launch.host,
                "--port",
                str(launch.port),
                "--served-model-name",
                MODEL,
            ],
            env=environment(plugin=self.plugin, fault_marker=launch.fault_marker, subprocess=self.subprocess),
        )


MODEL = "omni-tiny"  # the served model name


def image_call(ctx: Ctx, fault: str | None, i: int) -> Call:
    """Request `i` for a 16x16 image, with `[fault:FAULT]` in its prompt when a fault is given."""
    marker = f" [fault:{fault}]" if fault else ""
    body: dict[str, Any] = {"model": MODEL, "prompt": f"image {i}{marker}", "size": "16x16"}
    return lambda: http_call(ctx.host, ctx.port, "POST", "/v1/images/generations", body, t0=ctx.t0)


def _chat(ctx: Ctx, fault: str | None, i: int) -> Call:
    marker = f" [fault:{fault}]" if fault else ""
    body = {"model": MODEL, "messages": [{"role": "user", "content": f"image {i}{marker}"}]}
    return lambda: http_call(ctx.host, ctx.port, "POST", "/v1/chat/completions", body, t0=ctx.t0)


_FATAL = expect(("error", 500, ANY))
# A fatal failure must end the server within 10 s; an operator presses Ctrl+C if it has not by then.
_EXIT_DEADLINE = 10.0
_OK_OR_FATAL = expect(("ok", 200, None), ("error", 500, ANY))


def _fatal_among(fault: str, full: int) -> Load:
    """One request with `fault` first, then `full` (scaled) more queued behind it."""

    def load(ctx: Ctx) -> list[tuple[Call, Expect]]:
        calls = [(image_call(ctx, fault, 0), _FATAL)]
        return calls + [(image_call(ctx, "slow" if i == 1 else None, i), _OK_OR_FATAL) for i in range(1, ctx.n(full))]

    return load


def _one(route: Any, fault: str, allowed: Expect) -> Load:
    def load(ctx: Ctx) -> list[tuple[Call, Expect]]:
        return [(route(ctx, fault, 0), allowed), (route(ctx, None, 1), expect(("ok", 200, None)))]

    return load


def _hold(ctx: Ctx) -> list[tuple[Call, Expect]]:
    return [(image_call(ctx, "hold", 0), expect(("ok", 200, None), ("error", 500, ANY), ("lost", 0, None)))]


def off_and_on(
    name: str, title: str, target: Callable[[bool], Target], expect_exit: int, load: Load, **kw: Any
) -> list[Scenario]:
    """The scenario twice: `NAME-off` (the plugin disabled, a baseline) and `NAME-on`; `target(plugin)`."""
    return [
        Scenario(
            f"{name}-{state}",
            f"{title} (plugin {state})",
            target(state == "on"),
            lambda c: [],
            expect_exit,
            load,
            baseline=state == "off",
            **kw,
        )
        for state in ("off", "on")
    ]


def _both(
    name: str, title: str, expect_exit: int, load: Load, *, subprocess: bool = False, **kw: Any
) -> list[Scenario]:
    return off_and_on(name, title, lambda plugin: VllmOmniTarget(plugin, subprocess), expect_exit, load, **kw)


SCENARIOS: list[Scenario] = [
    *_both(
        "fatal-executor",
        "seed 001: the diffusion executor dies in StageDiffusionProc, requests queued",
        ExitCode.FATAL_ENGINE,
        _fatal_among("fatal", 8),
        subprocess=True,
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "fatal-executor-inline",
        "the diffusion executor dies in the inline stage, requests queued",
        ExitCode.FATAL_ENGINE,
        _fatal_among("fatal", 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "stage-killed",
        "the pipeline's only stage process is SIGKILLed",
        ExitCode.STAGE_LOST,
        _fatal_among("die", 8),
        subprocess=True,
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "oom-inline",
        "seed 003: torch.OutOfMemoryError in the inline diffusion stage",
        ExitCode.OOM,
        _fatal_among("oom", 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "oom-proc",
        "seed 003: torch.OutOfMemoryError in StageDiffusionProc",
        ExitCode.OOM,
        _fatal_among("oom", 8),
        subprocess=True,
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "chat-internal",
        "an internal ValueError (checkpoint path) on the diffusion chat route",
        0,
        _one(_chat, "value", expect(("error", 500, 0))),
        stop_after_load=signal.SIGINT,
    ),
    *_both(
        "guardrail",
        "a 422 guardrail rejection (vLLM-Omni's OmniClientError) on the chat route",
        0,
        _one(_chat, "guardrail", expect(("error", 422, 0))),
        stop_after_load=signal.SIGINT,
    ),
    *_both("ctrl-c", "Ctrl+C while StageDiffusionProc is busy", 0, _hold, subprocess=True, sigint_after_fault=0.5),
]
