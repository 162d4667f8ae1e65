"""The plugin's switch, its lazy patching and `unapply()`, each in a fresh interpreter.

`register()` decides once per process, so each case runs in its own `python -c`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

_PROBE = r"""
import json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
import omni_errors.vllm_omni as plugin
plugin.register()
from omni_errors.vllm_omni.patching import is_patched
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
    from omni_errors.vllm_omni.patching import applied
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


def test_enabled_patches_each_module_when_it_is_imported() -> None:
    report, _ = _probe(OMNI_ERRORS_VLLM_OMNI="1")
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


def test_unapply_restores_every_original() -> None:
    report, _ = _probe("unapply", OMNI_ERRORS_VLLM_OMNI="1")
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
