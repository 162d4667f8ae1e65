"""vLLM-Omni's LLM stages (`vllm-omni serve MODEL --omni`, target `vllm-omni`), each scenario run twice.

The seeds' own stage type: vLLM's real `EngineCore` in each stage's `StageEngineCoreProc`, over the
fake executor of the test plugin `omni_errors_fake_llm` (tests/vllm_omni/fake_llm, installed by
`make build-omni`), which writes the model folder (a one-layer Qwen2 config and a byte-level
tokenizer, no weights) and the deploy yaml. Pipelines: `omni_errors_talk`, Qwen2.5-Omni's shape
(thinker -> talker -> code2wav, text and audio out), and `omni_errors_chat`, one stage. Faults are
`[fault:NAME@STAGE]` markers in the prompt. As in `vllm_omni`, `NAME-off` is the released
behaviour (a baseline) and `NAME-on` the plugin's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.settings import STEP_DEADLINE
from omni_errors_tools.chaos.loadgen import http_call
from omni_errors_tools.chaos.scenario import ANY, Call, Ctx, Expect, Load, Scenario, expect
from omni_errors_tools.chaos.scenarios.vllm_omni import MODEL, environment, off_and_on
from omni_errors_tools.chaos.target import Launch, ServerCommand

__all__ = ["CHAT", "SCENARIOS", "STARTUP_S_PER_PROCESS", "TALK", "LlmTarget", "chat_body", "chat_call"]

TALK = "omni_errors_talk"
CHAT = "omni_errors_chat"
#: vLLM-Omni starts an LLM pipeline's stage processes one after another, each importing vLLM (about
#: 25 s idle, minutes on two loaded cores): the bound a test server's start gets, per process.
STARTUP_S_PER_PROCESS = 300.0


@dataclass(frozen=True)
class LlmTarget:
    """`vllm-omni serve MODEL --omni --deploy-config ...` over LLM stages, plugin on or off.

    `replicas` gives stages more than one replica: ((stage, count), ...); `step_deadline_s` is every
    stage process's step deadline (`OMNI_ERRORS_STEP_DEADLINE_S`; None leaves the default)."""

    plugin: bool
    pipeline: str = TALK
    replicas: tuple[tuple[int, int], ...] = ()
    step_deadline_s: float | None = None
    name: str = "vllm-omni"
    health_path: str = "/health"

    @property
    def processes(self) -> int:
        """How many stage processes the server starts (one per replica of each stage)."""
        from omni_errors_fake_llm.model import STAGES

        extra = dict(self.replicas)
        return sum(extra.get(stage_id, 1) for stage_id in range(len(STAGES[self.pipeline])))

    def command(self, launch: Launch) -> ServerCommand:
        try:
            from omni_errors_fake_llm.model import deploy_yaml, model_dir
        except ImportError as exc:  # pragma: no cover - a setup mistake
            why = "the LLM-stage target needs the test plugin omni_errors_fake_llm: run `make build-omni`"
            raise RuntimeError(why) from exc  # omni-errors: ignore[OE103]: a setup error of the chaos runner
        parent = launch.fault_marker.parent
        model = model_dir(parent)
        deploy = deploy_yaml(parent, self.pipeline, replicas=dict(self.replicas))
        argv = [
            str(Path(launch.python).with_name("vllm-omni")),
            "serve",
            str(model),
            "--omni",
            "--deploy-config",
            str(deploy),
            "--host",
            launch.host,
        ]
        argv += ["--port", str(launch.port), "--served-model-name", MODEL]
        env = {
            **environment(plugin=self.plugin, fault_marker=launch.fault_marker),
            "OMNI_FAKE_LLM": "1",
            "OMNI_FAKE_LLM_MARKER": str(launch.fault_marker),
        }
        env.pop("OMNI_FAKE_DIFFUSION")
        if self.step_deadline_s is not None:
            env[STEP_DEADLINE.name] = f"{self.step_deadline_s:g}"
        return ServerCommand(argv, env=env)


def chat_body(prompt: str, *, audio: bool = False) -> dict[str, Any]:
    """A chat request for `prompt`; `audio` asks for the code2wav stage's audio too."""
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": prompt}]}
    if audio:
        body["modalities"] = ["text", "audio"]
    return body


def chat_call(ctx: Ctx, fault: str | None, i: int) -> Call:
    """Chat request `i`, with `[fault:FAULT]` in its prompt when a fault is given (`NAME@STAGE`)."""
    marker = f" [fault:{fault}]" if fault else ""
    return lambda: http_call(
        ctx.host, ctx.port, "POST", "/v1/chat/completions", chat_body(f"hi {i}{marker}"), t0=ctx.t0
    )


_EXIT_DEADLINE = 10.0


def _fatal_among(fault: str, stage: int, full: int) -> Load:
    """One request with `fault` in `stage` first, then `full` (scaled) more behind it."""
    failed: Expect = expect(("error", 500, stage))
    rest: Expect = expect(("ok", 200, None), ("error", 500, ANY), ("error", 503, ANY))

    def load(ctx: Ctx) -> list[tuple[Call, Expect]]:
        calls = [(chat_call(ctx, f"{fault}@{stage}", 0), failed)]
        return calls + [(chat_call(ctx, "slow" if i == 1 else None, i), rest) for i in range(1, ctx.n(full))]

    return load


def _both(name: str, title: str, expect_exit: int, load: Load, **kw: Any) -> list[Scenario]:
    pipeline = kw.pop("pipeline", TALK)
    deadline = kw.pop("step_deadline_s", None)
    target = functools.partial(LlmTarget, pipeline=pipeline, step_deadline_s=deadline)
    return off_and_on(name, title, target, expect_exit, load, **kw)


#: The hung talker's step deadline: short, so that the scenario measures the answers, not the wait.
_HANG_DEADLINE_S = 5.0


SCENARIOS: list[Scenario] = [
    *_both(
        "llm-fatal",
        "seed 001: InductorError in the talker's EngineCore (stage 1 of thinker -> talker -> code2wav)",
        ExitCode.FATAL_ENGINE,
        _fatal_among("fatal", 1, 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "llm-oom",
        "seed 003: torch.OutOfMemoryError in the talker's EngineCore",
        ExitCode.OOM,
        _fatal_among("oom", 1, 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
    *_both(
        "llm-hang",
        f"the talker's forward never returns (a stuck kernel); its step deadline is {_HANG_DEADLINE_S:g} s",
        ExitCode.STAGE_HUNG,
        _fatal_among("hang", 1, 8),
        step_deadline_s=_HANG_DEADLINE_S,
        sigint_after_fault=_HANG_DEADLINE_S + _EXIT_DEADLINE,
    ),
    *_both(
        "llm-killed",
        "the talker's stage process is SIGKILLed",
        ExitCode.STAGE_LOST,
        _fatal_among("die", 1, 8),
        sigint_after_fault=_EXIT_DEADLINE,
    ),
]
