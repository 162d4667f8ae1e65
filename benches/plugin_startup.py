"""What the vLLM-Omni plugin adds to the start of each process of a server: time and memory.

Each kind of process is reproduced in a fresh interpreter that first imports what that process has
imported when vLLM loads its plugins (the baseline, not measured), then runs the plugin's
`register()`; the patches of every module already loaded apply right there, the others would
apply later on import. The delta is the plugin's cost: wall time and resident memory (VmRSS).

    .venv-omni/bin/python benches/plugin_startup.py [--repeat 5]

Run it in the vLLM-Omni environment (`make setup-omni build-omni`); `make bench-omni` does.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# process -> modules it has loaded when vLLM-Omni loads the general plugins there
PROCESSES = {
    "API process (vllm-omni serve)": [
        "vllm_omni.entrypoints.openai.api_server",
        "vllm_omni.engine.orchestrator",
        "vllm_omni.diffusion.stage_diffusion_client",
        "vllm_omni.diffusion.inline_stage_diffusion_client",
    ],
    "StageDiffusionProc": ["vllm_omni.diffusion.stage_diffusion_proc"],
    "diffusion worker": ["vllm_omni.diffusion.worker.diffusion_worker"],
    "plain vLLM process (EngineCore)": ["vllm.v1.engine.core"],
}

_CHILD = r"""
import importlib, json, os, sys, time
def rss():
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith("VmRSS:")) * 1024
for name in sys.argv[1:]:
    importlib.import_module(name)
import omni_errors.vllm_omni as plugin
before, t0 = rss(), time.perf_counter()
plugin.register()
elapsed = time.perf_counter() - t0
print(json.dumps({"ms": elapsed * 1000, "rss_mib": (rss() - before) / 2**20, "status": plugin.status()}))
"""


def measure(modules: list[str], env: dict[str, str]) -> dict[str, float | str]:
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, *modules], env=env, capture_output=True, text=True, check=True, timeout=900
    ).stdout
    result: dict[str, float | str] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per process kind (the median is shown)")
    parser.add_argument("--json", action="store_true", help="print the medians as JSON")
    args = parser.parse_args()
    env = {
        **os.environ,
        "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu"),
        "OMNI_ERRORS_VLLM_OMNI": "1",
    }
    rows = {}
    for process, modules in PROCESSES.items():
        runs = [measure(modules, env) for _ in range(args.repeat)]
        rows[process] = {
            "ms": statistics.median(float(r["ms"]) for r in runs),
            "rss_mib": statistics.median(float(r["rss_mib"]) for r in runs),
            "status": runs[0]["status"],
        }
        print(
            f"{process:<34} {rows[process]['ms']:8.1f} ms  {rows[process]['rss_mib']:7.1f} MiB  ({runs[0]['status']})",
            flush=True,
        )
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
