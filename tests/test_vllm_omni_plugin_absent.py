"""Without vLLM-Omni installed, the plugin vLLM loads in every process is a cheap no-op."""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys

import pytest


def _installed() -> bool:
    try:
        importlib.metadata.version("vllm-omni")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


pytestmark = pytest.mark.skipif(_installed(), reason="vLLM-Omni is installed here")

_PROBE = r"""
import json, sys
before = list(sys.meta_path)
import omni_errors_vllm_omni as plugin
plugin.register()
print(json.dumps({"status": plugin.status().decision.value, "hooked": sys.meta_path != before,
                  "heavy": sorted(m for m in ("vllm", "torch", "vllm_omni") if m in sys.modules)}))
"""


def test_register_without_vllm_omni_patches_nothing_and_imports_nothing_heavy() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, timeout=120)
    assert json.loads(out.stdout) == {"status": "absent", "hooked": False, "heavy": []}


def test_doctor_says_absent_and_exits_5() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "omni_errors_cli", "doctor", "--json"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 5
    report = json.loads(done.stdout)
    assert report["decision"] == "absent" and report["targets"] == [] and report["versions"]["vllm-omni"] is None
