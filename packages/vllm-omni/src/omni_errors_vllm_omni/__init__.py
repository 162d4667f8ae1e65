"""omni-errors inside vLLM-Omni: a vLLM general plugin that carries the record across every hop.

Installing omni-errors into a vLLM-Omni environment enables it: vLLM loads the
`vllm.general_plugins` entry point `omni_errors = omni_errors_vllm_omni:register` in the API
process, StageDiffusionProc, EngineCore and diffusion workers. `OMNI_ERRORS_VLLM_OMNI=0`
disables it (vLLM's `VLLM_PLUGINS` allow-list works too).

What it patches is data: `manifest.TARGETS`, one entry per replaced attribute, each with the
fingerprint of the original it was written against. `register()` checks every entry against the
installed sources (`verify`, which reads files and imports nothing) before it patches anything;
one target that differs refuses the whole plugin in that process, with one log line naming it.
A target whose source shows its upstream change (the series in `upstream/vllm-omni/`) is
*upstreamed*: nothing is patched there, and the rest is patched as usual.
Accepted, each module is patched right after its import (`hooks`), so a process that never
imports the orchestrator or the API server never pays for their patches. A patch that cannot be
applied then (its attribute missing at run time, its factory failing) refuses the plugin too:
what was applied is undone and nothing more is patched. `unapply()` puts every original back.
`status()` says what was decided, and why; `omni-errors doctor` prints it.
"""

from __future__ import annotations

import enum
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.fatal.fast_exit import skip_final_collections

from omni_errors_vllm_omni.manifest import Target, targets_by_module
from omni_errors_vllm_omni.settings import KEYS_ENV, LOG_NAME
from omni_errors_vllm_omni.verify import Check, State, check, installed

__all__ = ["ENV_VAR", "METRIC", "Decision", "Status", "decide", "register", "status", "unapply"]

_decision_log = logging.getLogger(LOG_NAME)

#: Set to 0 (or false/off/no) to disable the plugin in every process of the server.
ENV_VAR = "OMNI_ERRORS_VLLM_OMNI"
#: The gauge (value 1) on the API server's `/metrics` whose labels are the decision.
METRIC = "omni_errors_vllm_omni_plugin_info"
_API_SERVER = "vllm_omni.entrypoints.openai.api_server"


class Decision(enum.Enum):
    """What `register()` decided in a process."""

    #: every target matched the installed sources or is upstreamed; the patches of those that
    #: matched apply as their modules load.
    ENABLED = "enabled"
    #: every target shows its upstream change: nothing to patch.
    UPSTREAMED = "upstreamed"
    #: switched off (`OMNI_ERRORS_VLLM_OMNI=0`, or `unapply()`).
    DISABLED = "disabled"
    #: a target differs from (or is missing in) the installed sources: nothing is patched; or a patch
    #: could not be applied as its module was imported: every patch applied is undone.
    REFUSED = "refused"
    #: vllm-omni is not installed: nothing to do.
    ABSENT = "absent"


@dataclass(frozen=True, slots=True)
class Status:
    """The decision, why, the vllm-omni version seen, and each target's check (when it ran)."""

    decision: Decision
    reason: str
    vllm_omni: str | None = None
    checks: tuple[Check, ...] = ()


_lock = threading.Lock()
_status: Status | None = None
_gauge: Any = None  # prometheus_client's Gauge, once the API server module is imported


def status() -> Status | None:
    """What `register()` decided in this process (None before it ran)."""
    return _status


def _disabled() -> bool:
    return os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "false", "off", "no")


def decide() -> Status:
    """What `register()` would decide here, patching nothing (`omni-errors doctor` prints it)."""
    if _disabled():
        return Status(Decision.DISABLED, f"{ENV_VAR}={os.environ.get(ENV_VAR)}")
    present, version = installed()
    if not present:
        return Status(Decision.ABSENT, "vllm-omni is not installed")

    checks = tuple(check())
    bad = [c for c in checks if c.state not in (State.MATCHES, State.UPSTREAMED)]
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        reason = f"{bad[0].target.key} {bad[0].state.value}: {bad[0].reason}{more}"
        return Status(Decision.REFUSED, reason, version, checks)
    upstreamed = sum(c.state is State.UPSTREAMED for c in checks)
    if upstreamed == len(checks):
        return Status(
            Decision.UPSTREAMED, f"all {len(checks)} targets are upstreamed: nothing to patch", version, checks
        )
    if upstreamed:
        matched = len(checks) - upstreamed
        reason = f"{matched} targets match the installed sources, {upstreamed} are upstreamed (nothing patched there)"
        return Status(Decision.ENABLED, reason, version, checks)
    return Status(Decision.ENABLED, f"all {len(checks)} targets match the installed sources", version, checks)


def _to_patch() -> dict[str, list[Target]]:
    """The targets to patch, by module: every target but those upstreamed."""
    decided = _status
    upstreamed = {c.target.key for c in decided.checks if c.state is State.UPSTREAMED} if decided else set()
    grouped = {
        module: [t for t in targets if t.key not in upstreamed] for module, targets in targets_by_module().items()
    }
    return {module: targets for module, targets in grouped.items() if targets}


def _log_decision(decided: Status) -> None:
    if decided.decision is Decision.REFUSED:
        _decision_log.warning(
            "omni-errors: plugin refused for vllm-omni %s: %s; nothing is patched, vLLM-Omni's own error "
            "handling applies (`omni-errors doctor` lists every target)",
            decided.vllm_omni,
            decided.reason,
        )
    elif decided.decision in (Decision.ENABLED, Decision.UPSTREAMED):
        _decision_log.info(
            "omni-errors: plugin %s for vllm-omni %s: %s", decided.decision.value, decided.vllm_omni, decided.reason
        )


def _publish(module: ModuleType) -> None:
    """The decision as a gauge on the API server's `/metrics` (its registry is prometheus_client's default)."""
    global _gauge
    from prometheus_client import Gauge

    _gauge = Gauge(METRIC, "The omni-errors vLLM-Omni plugin's decision in this process", ["decision", "vllm_omni"])
    _set_gauge()


def _set_gauge() -> None:
    decided = _status
    if _gauge is None or decided is None:
        return
    _gauge.clear()  # one series: the decision now
    _gauge.labels(decision=decided.decision.value, vllm_omni=decided.vllm_omni or "").set(1)


def _patch_module(module: ModuleType) -> None:
    from omni_errors_vllm_omni.patching import ApplyError, apply

    decided = _status
    if decided is None or decided.decision is not Decision.ENABLED:
        return  # switched off or refused in another thread since this hook was set
    try:
        apply(module, _to_patch()[module.__name__])
    except Exception as exc:  # omni-errors: ignore[OE202]: the failure is the refusal's reason, logged
        reason = str(exc) if isinstance(exc, ApplyError) else f"{module.__name__}: {type(exc).__name__}: {exc}"
        _refuse_at_apply(reason)


def _refuse_at_apply(reason: str) -> None:
    """Never half applied: a patch that fails refuses the plugin, and every patch applied so far is undone."""
    global _status
    with _lock:
        previous = _status
        if previous is None or previous.decision is not Decision.ENABLED:
            return
        why = f"a patch could not be applied: {reason}"
        _status = Status(Decision.REFUSED, why, previous.vllm_omni, previous.checks)
    restored = _undo()
    _decision_log.warning(
        "omni-errors: plugin refused for vllm-omni %s: %s; the %d patches applied are undone, vLLM-Omni's own "
        "error handling applies",
        previous.vllm_omni,
        reason,
        restored,
        exc_info=True,
    )
    _set_gauge()


def _check_keys() -> None:
    """An operator who set CURVE keys gets them, or no process: never a plaintext deployment instead."""
    directory = os.environ.get(KEYS_ENV)
    if not directory:
        return
    from omni_errors_vllm_omni.sockets import load_keys

    try:
        load_keys(Path(directory))
    except Exception as exc:  # a KeyFileError or an OSError: said once, then no process
        _decision_log.critical("omni-errors: %s cannot be used, so this process does not start: %s", KEYS_ENV, exc)
        raise SystemExit(ExitCode.STARTUP_FAILURE) from None


def _print_core_lines_beside_vllms(*, add: bool) -> None:
    """omni-errors' core (the fatal state, the carriers: called by the patches or by vLLM-Omni itself)
    logs under `omni_errors`; in a vLLM process its lines go to vLLM's handlers, in vLLM's format,
    as the plugin's own do (`LOG_NAME`). They still propagate: a handler on the root sees them too."""
    core = logging.getLogger("omni_errors")
    for handler in logging.getLogger("vllm").handlers:
        if add and handler not in core.handlers:
            core.addHandler(handler)
        elif not add:
            core.removeHandler(handler)


def register() -> None:
    """The `vllm.general_plugins` entry point; idempotent (vLLM may load plugins more than once)."""
    global _status
    with _lock:
        if _status is not None:
            return
        _status = decide()
    _log_decision(_status)
    if _status.decision not in (Decision.ENABLED, Decision.REFUSED, Decision.UPSTREAMED):
        return
    if _status.decision is not Decision.REFUSED:
        _print_core_lines_beside_vllms(add=True)
    if _status.decision is Decision.ENABLED:
        _check_keys()
        skip_final_collections()  # a stage that must end within 5 s spent 6 s collecting at exit
    from omni_errors_vllm_omni.hooks import when_imported

    when_imported(_API_SERVER, _publish)
    if _status.decision is Decision.ENABLED:
        for module in _to_patch():
            if _status.decision is not Decision.ENABLED:
                break  # a module already imported could not be patched: the plugin is refused
            when_imported(module, _patch_module)


def unapply() -> int:
    """Switch the plugin off in this process: pending patches dropped, every original restored,
    the fatal state forgotten. Returns how many attributes were restored."""
    global _status
    with _lock:
        previous = _status
        _status = Status(Decision.DISABLED, "switched off by unapply()", previous.vllm_omni if previous else None)
    restored = _undo()
    _print_core_lines_beside_vllms(add=False)
    _set_gauge()
    return restored


def _undo() -> int:
    """Pending patches dropped, every original restored, the fatal state forgotten; how many were restored."""
    from omni_errors.fatal import process as fatal

    from omni_errors_vllm_omni.hooks import cancel
    from omni_errors_vllm_omni.patching import unapply as restore

    cancel(_patch_module)
    restored = restore()
    fatal.reset()
    return restored
