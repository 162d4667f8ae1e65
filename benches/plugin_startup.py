"""What the vLLM-Omni plugin adds to the start of each process of a server: time and memory.

Each kind of process is reproduced in a fresh interpreter that first imports what that process has
imported when vLLM loads its plugins and lists the plugin entry points (as vLLM does before it
loads any), then loads the plugin as vLLM does (`import omni_errors_vllm_omni`) and runs
`register()`, which verifies every manifest target against the installed sources; the patches of
every module already loaded apply right there, the others would apply later on import. The
baseline is that process's own import, measured in the same interpreter (wall time, resident
memory); the plugin's cost is the delta its import and `register()` add together (wall time,
VmRSS), once with the verification cache warm (every start but the first) and once empty (the
first start after an install or an upgrade).

`--plugin-path DIR` measures another checkout's plugin (its root; its `python/` directory before
the plugin had a distribution of its own) the same way, for a side-by-side run. omni-errors' own
modules are byte-compiled first, as a wheel install does (this environment sets
PYTHONDONTWRITEBYTECODE).

    .venv-omni/bin/python benches/plugin_startup.py [--repeat 5] [--plugin-path ../main]

Run it in the vLLM-Omni environment (`make build-omni`); `make bench-omni` does.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

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
t0 = time.perf_counter()
for name in sys.argv[1:]:
    importlib.import_module(name)
base_s = time.perf_counter() - t0
import importlib.metadata
importlib.metadata.entry_points(group="vllm.general_plugins")  # vLLM lists them before loading any
before, t0 = rss(), time.perf_counter()
import omni_errors_vllm_omni as plugin
plugin.register()
elapsed = time.perf_counter() - t0
status = plugin.status()
print(json.dumps({
    "base_s": base_s, "base_rss_mib": before / 2**20,
    "ms": elapsed * 1000, "rss_mib": (rss() - before) / 2**20,
    "status": getattr(getattr(status, "decision", status), "value", status),
}))
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
    parser.add_argument(
        "--plugin-path", type=Path, help="measure the plugin of this checkout instead (its root, or its python/ folder)"
    )
    args = parser.parse_args()
    import omni_errors
    import omni_errors_vllm_omni

    # The core and the plugin's own package: the checkout's python/ and packages/vllm-omni/src, where they exist.
    if args.plugin_path is not None:
        root = args.plugin_path.parent if args.plugin_path.name == "python" else args.plugin_path
        paths = [p for p in (root / "python", root / "packages" / "vllm-omni" / "src") if p.is_dir()]
    else:
        paths = [Path(omni_errors.__file__).parents[1], Path(omni_errors_vllm_omni.__file__).parents[1]]
    for path in paths:
        compileall.compile_dir(str(path), quiet=1)
    source = paths[0]
    env = {
        **os.environ,
        "VLLM_TARGET_DEVICE": os.environ.get("VLLM_TARGET_DEVICE", "cpu"),
        "OMNI_ERRORS_VLLM_OMNI": "1",
    }
    if args.plugin_path is not None:
        env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    rows: dict[str, dict[str, float | str]] = {}
    print(f"plugin from {source}")
    print(
        f"{'process (median of ' + str(args.repeat) + ')':<34} {'baseline: import, RSS':>20} | "
        "plugin's import + register(): warm cache, empty cache"
    )
    with tempfile.TemporaryDirectory() as cache:
        warm_env = {**env, "OMNI_ERRORS_CACHE_DIR": cache}
        measure(["json"], warm_env)  # fills the verification cache, as the first process does
        for process, modules in PROCESSES.items():
            runs = [measure(modules, warm_env) for _ in range(args.repeat)]
            with tempfile.TemporaryDirectory() as empty:
                cold = measure(modules, {**env, "OMNI_ERRORS_CACHE_DIR": empty})
            row: dict[str, float | str] = {
                key: statistics.median(float(r[key]) for r in runs)
                for key in ("base_s", "base_rss_mib", "ms", "rss_mib")
            }
            row["cold_ms"] = float(cold["ms"])
            row["status"] = runs[0]["status"]
            rows[process] = row
            print(
                f"{process:<34} {row['base_s']:6.1f} s {row['base_rss_mib']:7.0f} MiB | "
                f"+{row['ms']:7.1f} ms +{row['rss_mib']:6.1f} MiB, empty cache +{row['cold_ms']:7.1f} ms "
                f"({row['status']})",
                flush=True,
            )
    if args.json:
        print(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
