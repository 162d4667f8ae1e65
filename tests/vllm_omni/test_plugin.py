"""The plugin's switch, its version gate, and its lazy patching, each in a fresh interpreter.

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
if len(sys.argv) > 1:
    plugin.SUPPORTED = (sys.argv[1],)
plugin.register()
from omni_errors.vllm_omni.patching import is_patched
import vllm_omni.diffusion.data as data
import vllm_omni.diffusion.diffusion_engine as engine
report = {
    "status": plugin.status(),
    "from_exception": is_patched(data.DiffusionOutput.from_exception.__func__),
    "postprocess": is_patched(engine.DiffusionEngine.postprocess_output),
}
if plugin.status() != "refused":  # behaviour 5: what a failed async video job stores, for its GET
    import vllm_omni.entrypoints.openai.video.generation.helpers as helpers
    error = helpers._video_error_from_exception(ValueError("could not read /home/alice/ckpt/model.safetensors"))
    report["video"] = {"code": error.code, "message": error.message}
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


def test_an_unknown_vllm_omni_version_is_refused_whole_with_one_log_line() -> None:
    report, stderr = _probe("9.9.", OMNI_ERRORS_VLLM_OMNI="1")
    assert report == {"status": "refused", "from_exception": False, "postprocess": False}
    assert stderr.count("is not a version this plugin knows") == 1
