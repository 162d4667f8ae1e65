"""The plugin's switch, its lazy patching, `unapply()`, and a patch that fails as it is applied, each
in a fresh interpreter.

`register()` decides once per process, so each case runs in its own `python -c` (the enabled plugin
and its `unapply()` share one).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

_PROBE = r"""
import json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
import omni_errors_vllm_omni as plugin
plugin.register()
from omni_errors_vllm_omni.patching import is_patched
import vllm_omni.diffusion.data as data
import vllm_omni.diffusion.diffusion_engine as engine
report = {
    "status": plugin.status().decision.value,
    "from_exception": is_patched(data.DiffusionOutput.from_exception.__func__),
    "postprocess": is_patched(engine.DiffusionEngine.postprocess_output),
}
# behaviour 5: what a failed async video job stores, for its GET
import vllm_omni.entrypoints.openai.video.generation.helpers as helpers
def video():
    error = helpers._video_error_from_exception(ValueError("could not read /home/alice/ckpt/model.safetensors"))
    return {"code": error.code, "message": error.message}
report["video"] = video()
if len(sys.argv) > 1:  # switch the plugin off: every original back
    from omni_errors_vllm_omni.patching import applied
    report["applied"] = len(applied())
    report["restored"] = plugin.unapply()
    report["after"] = {
        "status": plugin.status().decision.value,
        "from_exception": is_patched(data.DiffusionOutput.from_exception.__func__),
        "postprocess": is_patched(engine.DiffusionEngine.postprocess_output),
        "video": video(),
        "left": len(applied()),
    }
print(json.dumps(report))
"""


def _probe(*args: str, **env: str) -> tuple[dict[str, object], str]:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, *args],
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu", **env},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.fixture(scope="module")
def enabled_then_unapplied() -> dict[str, object]:
    """One probe for the two tests that read it: the plugin enabled, then `unapply()`."""
    report, _ = _probe("unapply", OMNI_ERRORS_VLLM_OMNI="1")
    return report


def test_enabled_patches_each_module_when_it_is_imported(enabled_then_unapplied: dict[str, object]) -> None:
    report = enabled_then_unapplied
    assert report["status"] == "enabled"
    assert report["from_exception"] and report["postprocess"]
    # A failed async video job stores the record: a server fault (the job was accepted), sanitized.
    assert report["video"] == {"code": 500, "message": "could not read <path>"}


def test_the_environment_variable_disables_it() -> None:
    report, _ = _probe(OMNI_ERRORS_VLLM_OMNI="0")
    assert {k: report[k] for k in ("status", "from_exception", "postprocess")} == {
        "status": "disabled",
        "from_exception": False,
        "postprocess": False,
    }
    # Behaviour 5 as released: the failed job's GET shows the raw exception text, path included.
    assert report["video"] == {"code": 500, "message": "could not read /home/alice/ckpt/model.safetensors"}


def test_unapply_restores_every_original(enabled_then_unapplied: dict[str, object]) -> None:
    report = enabled_then_unapplied
    assert report["status"] == "enabled" and report["from_exception"] and report["postprocess"]
    applied = report["applied"]
    assert isinstance(applied, int) and applied >= 4  # data, engine, video helpers and what they import
    assert report["restored"] == applied
    assert report["after"] == {
        "status": "disabled",
        "from_exception": False,
        "postprocess": False,
        "video": {"code": 500, "message": "could not read /home/alice/ckpt/model.safetensors"},
        "left": 0,
    }


# A release whose module, once run, lacks what its source defines (the source check passes) or holds
# something else under the name, so the patch fails as it is applied: after `vllm_omni.diffusion.data`
# was patched (the engine imports it first), or among the first patches of its own module.
_APPLY_PROBE = r"""
import importlib, json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(message)s")
import omni_errors_vllm_omni as plugin
from omni_errors_vllm_omni.hooks import pending
from omni_errors_vllm_omni.patching import applied, is_patched
plugin.register()
waiting = sorted(pending())
importlib.import_module(sys.argv[1])
import vllm_omni.diffusion.data as data
import vllm_omni.entrypoints.openai.video.generation.helpers as helpers  # imported after the refusal
error = helpers._video_error_from_exception(ValueError("could not read /home/alice/ckpt/model.safetensors"))
print(json.dumps({
    "waiting": waiting,
    "status": plugin.status().decision.value,
    "reason": plugin.status().reason,
    "pending": pending(),
    "applied": len(applied()),
    "from_exception": is_patched(data.DiffusionOutput.from_exception.__func__),
    "video": error.message,
    "api_server_imported": "vllm_omni.entrypoints.openai.api_server" in sys.modules,
}))
"""

_API_SERVER = "vllm_omni.entrypoints.openai.api_server"
_ENGINE = "vllm_omni.diffusion.diffusion_engine"
_ORCHESTRATOR = "vllm_omni.engine.orchestrator"
_APPLY_FAILURES = {
    "attribute-gone": (
        "diffusion/diffusion_engine.py", "del DiffusionEngine._emit_outputs", _ENGINE,
        f"{_ENGINE}:DiffusionEngine._emit_outputs is missing",
    ),
    "factory-fails": (
        "engine/orchestrator.py", "import functools\nErrorMessage = functools.partial(ErrorMessage)", _ORCHESTRATOR,
        f"{_ORCHESTRATOR}:ErrorMessage: its patch could not be built (TypeError",
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(_APPLY_FAILURES))
def test_a_patch_that_fails_as_it_is_applied_refuses_the_plugin_and_undoes_the_rest(
    case: str, package_copy: Path, tmp_path: Path
) -> None:
    relative, appended, module, reason = _APPLY_FAILURES[case]
    path = package_copy / relative
    original = path.read_text()
    path.write_text(f"{original}\n{appended}\n")
    try:
        done = subprocess.run(
            [sys.executable, "-c", _APPLY_PROBE, module],
            env={
                **os.environ, "VLLM_TARGET_DEVICE": "cpu", "PYTHONPATH": str(package_copy.parent),
                "OMNI_ERRORS_CACHE_DIR": str(tmp_path), "OMNI_ERRORS_VLLM_OMNI": "1",
            },
            capture_output=True, text=True, timeout=600, check=True,
        )  # fmt: skip
    finally:
        path.write_text(original)
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert module in report["waiting"], "the source check accepted the release: the patch waited for its import"
    assert report["status"] == "refused"
    assert report["reason"].startswith(f"a patch could not be applied: {reason}"), report["reason"]
    assert report["applied"] == 0 and not report["from_exception"], "what was applied is undone"
    # The pending patches are cancelled (only the decision's gauge still waits for the API server) ...
    assert report["pending"] == ({} if report["api_server_imported"] else {_API_SERVER: 1})
    # ... so a module imported afterwards keeps vLLM-Omni's behaviour.
    assert report["video"] == "could not read /home/alice/ckpt/model.safetensors"
    logged = done.stdout + done.stderr  # once vLLM is imported, its loggers write to stdout
    refusals = [line for line in logged.splitlines() if "omni-errors" in line and "refused" in line]
    assert len(refusals) == 1 and reason in refusals[0], logged
    undone = re.search(r"the (\d+) patches applied are undone", refusals[0])
    assert undone and int(undone.group(1)) >= 1, "the modules imported before it were patched, then restored"


_CORE_LINE = r"""
import sys
import vllm.logger  # vLLM's logger gets its handler here, as in every process vLLM starts
import omni_errors_vllm_omni as plugin
if sys.argv[1] == "register":
    plugin.register()
from omni_errors.fatal import process
from omni_errors.fatal.exitcodes import ExitCode
from omni_errors.semantics.core_table import fatal_record
process.declare(fatal_record(stage_id=1), ExitCode.OOM)
"""


@pytest.mark.parametrize("registered", [True, False], ids=["registered", "not-registered"])
def test_the_cores_fatal_line_is_printed_in_vllms_format_once_the_plugin_is_registered(registered: bool) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _CORE_LINE, "register" if registered else "-"],
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu", "OMNI_ERRORS_VLLM_OMNI": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    printed = done.stdout + done.stderr  # vLLM's handler writes to stdout, the last-resort one to stderr
    lines = [line for line in printed.splitlines() if "ending the pipeline with exit code 81" in line]
    assert len(lines) == 1, printed  # printed once, whichever handler printed it
    # vLLM's format names the level and the source; Python's last-resort handler prints the message alone
    assert lines[0].startswith("CRITICAL ") is registered
