"""`omni-errors doctor`: what the vLLM-Omni plugin decides in this environment, and why.

It runs the check `register()` runs in every process of a server (`decide`), patching nothing
and importing neither vLLM nor vLLM-Omni, and prints the versions, the decision, each target's
state (under the process it runs in), the multi-node settings (the rejoin window, and whether the
deployment's sockets are CURVE, with the keys checked) and the exit codes a deployment would see
on a fatal failure. Its exit status is the decision (`EXIT_STATUS`; `KEYS_UNUSABLE` when keys are
set but cannot be used), so an image build or CI can assert it; `--json` prints the same facts.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

from omni_errors.fatal.exitcodes import MEANINGS, ExitCode
from omni_errors.fatal.step_deadline import step_deadline_s
from omni_errors.fatal.tables import generated, in_order, markdown_table
from omni_errors.settings import REJOIN_WINDOW, STEP_DEADLINE

from omni_errors_vllm_omni import Decision, Status, decide
from omni_errors_vllm_omni.manifest import Process

__all__ = ["EXIT_CODES", "EXIT_STATUS", "KEYS_UNUSABLE", "add_command", "report"]

#: The documented codes a vLLM-Omni server's processes exit with (the API process, a
#: StageDiffusionProc, a headless launcher); anything else is vLLM's own (Ctrl+C, SIGTERM).
EXIT_CODES = (
    ExitCode.STARTUP_FAILURE,
    ExitCode.OOM,
    ExitCode.FATAL_ENGINE,
    ExitCode.STAGE_HUNG,
    ExitCode.LINK_LOST,
    ExitCode.STAGE_LOST,
)

#: The exit status of `omni-errors doctor` for each decision.
EXIT_STATUS = {
    Decision.ENABLED: 0,
    Decision.UPSTREAMED: 0,
    Decision.REFUSED: 3,
    Decision.DISABLED: 4,
    Decision.ABSENT: 5,
}
#: The exit status when the plugin is enabled but `OMNI_ERRORS_VLLM_OMNI_KEYS` cannot be used.
KEYS_UNUSABLE = 6

_ENTRY_POINT = "omni_errors"


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _loaded_by_vllm() -> tuple[bool, str | None]:
    """Whether vLLM would load the plugin: the entry point is installed and `VLLM_PLUGINS` allows it."""
    installed = any(ep.name == _ENTRY_POINT for ep in importlib.metadata.entry_points(group="vllm.general_plugins"))
    allowed = os.environ.get("VLLM_PLUGINS")
    if not installed:
        return False, "the vllm.general_plugins entry point omni_errors is not installed"
    if allowed is not None and _ENTRY_POINT not in [p.strip() for p in allowed.split(",")]:
        return False, f"VLLM_PLUGINS={allowed} does not list {_ENTRY_POINT}"
    return True, None


def _multi_node() -> dict[str, Any]:
    """The head's rejoin window and the deployment's sockets (CURVE keys checked, as each process will)."""
    from omni_errors.server.rejoin import rejoin

    from omni_errors_vllm_omni.settings import KEYS_ENV
    from omni_errors_vllm_omni.sockets import load_keys

    directory = os.environ.get(KEYS_ENV)
    sockets: dict[str, Any] = {"curve": directory is not None, "keys": directory, "error": None}
    if directory is not None:
        try:
            keys = load_keys(Path(directory))
        except Exception as exc:  # omni-errors: ignore[OE202]: the problem is the report (KeyFileError, OSError)
            sockets["error"] = str(exc)
        else:
            sockets["allowed_keys"] = len(keys.allowed)
    return {"rejoin_window_s": rejoin().window_s, "window_setting": REJOIN_WINDOW.name, "sockets": sockets}


def report() -> dict[str, Any]:
    """Everything `doctor` prints, as JSON-ready data."""
    status: Status = decide()
    loaded, why_not = _loaded_by_vllm()
    if status.decision in (Decision.ENABLED, Decision.REFUSED, Decision.UPSTREAMED) and not loaded:
        status = Status(Decision.DISABLED, str(why_not), status.vllm_omni, status.checks)
    enabled = status.decision is Decision.ENABLED
    return {
        "versions": {
            "vllm": _version("vllm"),
            "vllm-omni": _version("vllm-omni"),
            "omni-errors": _version("omni-errors"),
        },
        "decision": status.decision.value,
        "reason": status.reason,
        "targets": [
            {
                "target": c.target.key,
                "process": c.target.process.value,
                "hop": c.target.hop.value,
                "kind": c.target.kind.value,
                "state": c.state.value,
                "fingerprint": c.fingerprint,
                "recorded": dict(c.target.fingerprints),
                "upstreamed": dict(c.target.upstreamed),
                "reason": c.reason,
            }
            for c in status.checks
        ],
        "stages": {"step_deadline_s": step_deadline_s(), "deadline_setting": STEP_DEADLINE.name},
        "multi_node": _multi_node(),
        "fatal_exit_codes": (
            [{"code": int(code), "name": code.name, "when": MEANINGS[code]} for code in in_order(EXIT_CODES)]
            if enabled
            else None
        ),
    }


WIDTH = 100  # the text report's lines; --json has everything whole
_COLUMNS = 2 + 7 + 2 + 7 + 2 + 16  # kind, state and fingerprint, with their gaps


def _wrapped(text: str, indent: str, hang: str) -> list[str]:
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=hang, break_on_hyphens=False)


def _target_lines(targets: list[dict[str, Any]]) -> list[str]:
    """The targets under the process they run in, then under their modules: a process once, each of
    its modules once, then each patched name in it."""
    grouped: dict[str, dict[str, list[dict[str, Any]]]] = {p.value: {} for p in Process}
    for t in targets:
        grouped[t["process"]].setdefault(t["target"].partition(":")[0], []).append(t)
    names = [t["target"].partition(":")[2] for t in targets]
    states = max(7, *(len(t["state"]) for t in targets))  # "upstreamed" widens the column
    width = min(max(len(n) for n in names), WIDTH - 6 - _COLUMNS - (states - 7))
    lines = [f"  {'target':<{width + 4}}  {'kind':<7}  {'state':<{states}}  fingerprint"]
    for process, by_module in grouped.items():
        if by_module:
            lines.append(f"  {process}")
        for module, rows in by_module.items():
            lines.append(f"    {module}")
            for t in rows:
                name = t["target"].partition(":")[2]
                columns = f"{t['kind']:<7}  {t['state']:<{states}}  {t['fingerprint'] or '-'}"
                if len(name) > width:  # a name longer than its column gets a line of its own
                    lines += [f"      {name}", f"      {'':<{width}}  {columns}"]
                else:
                    lines.append(f"      {name:<{width}}  {columns}")
                if t["state"] not in ("matches", "upstreamed"):
                    lines += _wrapped(f"^ {t['reason']}", "        ", "          ")
    return lines


def _print(data: dict[str, Any]) -> None:
    versions = data["versions"]
    print("omni-errors doctor: the vLLM-Omni plugin in this environment\n")
    for name in ("vllm", "vllm-omni", "omni-errors"):
        print(f"  {name:<12} {versions[name] or 'not installed'}")
    print()
    print("\n".join(_wrapped(f"{data['decision']}: {data['reason']}", "  plugin       ", " " * 15)), end="\n\n")
    if data["targets"]:
        print("\n".join(_target_lines(data["targets"])), end="\n\n")
    deadline_s, setting = data["stages"]["step_deadline_s"], data["stages"]["deadline_setting"]
    if deadline_s:
        step = f"a step still running after {deadline_s:g} s ends its stage, exit 84 ({setting})"
    else:
        step = f"no step deadline ({setting}=0): a hung stage is never ended"
    print("\n".join(_wrapped(step, "  stages       ", " " * 15)), end="\n\n")
    multi = data["multi_node"]
    sockets = multi["sockets"]
    if not sockets["curve"]:
        where = "plaintext: any host that reaches the head can join (set OMNI_ERRORS_VLLM_OMNI_KEYS)"
    elif sockets["error"]:
        where = f"CURVE keys unusable: {sockets['error']}"
    else:
        where = f"CURVE, keys in {sockets['keys']} ({sockets['allowed_keys']} public keys allowed in)"
    line = f"rejoin window {multi['rejoin_window_s']:g} s ({multi['window_setting']}); sockets {where}"
    print("\n".join(_wrapped(line, "  multi-node   ", " " * 15)), end="\n\n")
    codes = data["fatal_exit_codes"]
    if codes is None:
        print("  exit code on a fatal failure: vLLM-Omni's own (the plugin is not active: a dead stage can hang")
        print("  the server, which then exits 0 on Ctrl+C)")
    else:
        print("  exit code on a fatal failure (the highest precedence among those seen wins):")
        for row in codes:
            print("\n".join(_wrapped(row["when"], f"    {row['code']}  ", " " * 8)))


def _run(args: argparse.Namespace) -> int:
    if args.table:
        from omni_errors_vllm_omni.manifest import render_table

        sys.stdout.write(render_table())
        return 0
    if args.exit_codes:
        sys.stdout.write(generated("exit codes with the plugin", markdown_table(EXIT_CODES)))
        return 0
    data = report()
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        _print(data)
    status = EXIT_STATUS[Decision(data["decision"])]
    if status == 0 and data["multi_node"]["sockets"]["error"]:
        return KEYS_UNUSABLE
    return status


def add_command(sub: Any) -> None:
    """Register `omni-errors doctor` on the CLI's subparsers."""
    statuses = ", ".join(f"{code} {decision.value}" for decision, code in EXIT_STATUS.items())
    statuses += f", {KEYS_UNUSABLE} enabled but OMNI_ERRORS_VLLM_OMNI_KEYS unusable"
    parser = sub.add_parser(
        "doctor",
        help="say whether the vLLM-Omni plugin is active here, and why (versions, every patch target)",
        description="Check every patch target of the vLLM-Omni plugin against the installed sources, as each "
        "server process does before patching, and print the versions, the decision, each target's state "
        f"and the exit codes a deployment would see. Exit status: {statuses}.",
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--table", action="store_true", help="print the patch table of docs/vllm-omni.md (Markdown) and exit 0"
    )
    parser.add_argument(
        "--exit-codes", action="store_true", help="print the exit-code table of docs/vllm-omni.md (Markdown) and exit 0"
    )
    parser.set_defaults(func=_run)
