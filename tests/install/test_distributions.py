"""Each distribution and each core extra, proven on fresh venvs.

The wheels are built once per session (the core with `maturin build --release`, the others with
hatchling), each venv made with `uv venv` and filled with `uv pip install` from those wheels only,
pinned to the environment's lock so every package comes from the warm uv cache (offline first;
online only if the cache misses). Each probe imports its layer or runs its command.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOCK = ROOT / "requirements.lock"
OMNI_LOCK = ROOT / "requirements-omni.lock"
HEAVY = ("torch", "vllm", "fastapi", "msgpack", "msgspec", "zmq", "prometheus_client")
# The venvs must see only what was installed into them, never this checkout's sources.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
#: The distributions of packages/, by name.
MEMBERS = {
    "omni-errors-cli": ROOT / "packages" / "cli",
    "omni-errors-audit": ROOT / "packages" / "audit",
    "omni-errors-tools": ROOT / "packages" / "tools",
    "omni-errors-vllm-omni": ROOT / "packages" / "vllm-omni",
}
#: Which of our distributions each one depends on (each pins the exact version).
OURS = {
    "omni-errors": (),
    "omni-errors-audit": (),
    "omni-errors-cli": ("omni-errors",),
    "omni-errors-tools": ("omni-errors", "omni-errors-cli"),
    "omni-errors-vllm-omni": ("omni-errors", "omni-errors-cli"),
}

CORE = f"""
import importlib.metadata as md, json, sys
import omni_errors, omni_errors.embed, omni_errors.errors, omni_errors.semantics.legacy
d = omni_errors.OmniErrorDetails("stage 1 died at /srv/x.py", "server", 500, "InternalServerError", stage_id=1)
assert omni_errors.decode(omni_errors.encode(d)) == d and "/srv" not in d.message
assert omni_errors.semantics.legacy.from_legacy({{"error": "x", "status_code": 404}}).category == "client"
dists = sorted(dist.metadata["Name"] for dist in md.distributions())
entry_points = [f"{{ep.group}}:{{ep.name}}" for ep in md.distribution("omni-errors").entry_points]
heavy = sorted(m for m in {HEAVY!r} if m in sys.modules)
print(json.dumps({{"dists": dists, "entry_points": entry_points, "heavy": heavy}}))
"""
PROBES = {
    "transport": (
        "import msgpack, zmq\n"
        "from omni_errors import OmniErrorDetails, embed\n"
        "d = OmniErrorDetails('x', 'client', 400, 'BadRequestError')\n"
        "assert msgpack.unpackb(msgpack.packb({'e': d}, default=embed.default), ext_hook=embed.ext_hook) == {'e': d}"
    ),
    "vllm": (
        "import omni_errors\n"
        "from omni_errors.semantics.metrics import observe\n"
        "d = omni_errors.classify(omni_errors.OmniStageTimeoutError('late', stage_id=2))\n"
        "assert (d.status_code, d.stage_id) == (504, 2) and omni_errors.classify(omni_errors.rebuild(d)) == d\n"
        "observe(d)"
    ),
    "server": (
        "from fastapi import FastAPI\n"
        "from omni_errors.server import install\n"
        "from omni_errors.render.sse import sse_guard\n"
        "import uvicorn, websockets\n"
        "install(FastAPI())"
    ),
}

# What importing the core may not do: patch, start or register anything. Everything outside the core
# that importing it loads (vLLM, torch, FastAPI, pyzmq...) is imported first, so that only the core's
# own effects are compared; then every module of the core is imported, and the process's hooks compared.
SIDE_EFFECTS = """
import atexit, importlib, json, pkgutil, signal, sys, threading, warnings
warnings.simplefilter("ignore")
outside = json.loads(open(sys.argv[1]).read())
for name in outside:
    try:
        importlib.import_module(name)
    except Exception:
        pass
import prometheus_client, zmq

def hooks():
    return {
        "meta_path": [repr(f) for f in sys.meta_path],
        "path_hooks": [repr(h) for h in sys.path_hooks],
        "atexit": atexit._ncallbacks(),
        "threads": sorted(t.name for t in threading.enumerate()),
        "signals": {s.name: repr(signal.getsignal(s)) for s in signal.valid_signals() if hasattr(s, "name")},
        "excepthook": repr(sys.excepthook),
        "zmq": {f"{cls.__name__}.{m}": id(getattr(cls, m)) for cls, ms in
                ((zmq.Socket, ("bind", "connect")), (zmq.Context, ("term", "destroy"))) for m in ms},
        "prometheus": sorted(prometheus_client.REGISTRY._names_to_collectors),
    }

before = hooks()
import omni_errors
modules = sorted(m.name for m in pkgutil.walk_packages(omni_errors.__path__, "omni_errors."))
for name in modules:
    importlib.import_module(name)
after = hooks()
changed = {k: [before[k], after[k]] for k in before if before[k] != after[k]}
print(json.dumps({"modules": len(modules), "changed": changed}))
"""
LIST_OUTSIDE = """
import importlib, json, pkgutil, sys, warnings
warnings.simplefilter("ignore")
import omni_errors
for m in pkgutil.walk_packages(omni_errors.__path__, "omni_errors."):
    importlib.import_module(m.name)
print(json.dumps([m for m in sys.modules if m.split(".")[0] not in ("omni_errors", "__main__")]))
"""


def _uv() -> str:
    return shutil.which("uv", path=str(BIN)) or shutil.which("uv") or pytest.skip("uv is not installed")


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Every distribution's wheel, by name."""
    out = tmp_path_factory.mktemp("wheels")
    maturin = shutil.which("maturin", path=str(BIN)) or "maturin"
    subprocess.run(
        [maturin, "build", "--release", "--quiet", "--interpreter", sys.executable, "--out", str(out)],
        cwd=ROOT,
        check=True,
        timeout=1800,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
    )
    for folder in MEMBERS.values():
        subprocess.run(
            [sys.executable, "-m", "hatchling", "build", "--target", "wheel", "--directory", str(out)],
            cwd=folder,
            check=True,
            capture_output=True,
            timeout=300,
        )
    built = {}
    for wheel in out.glob("*.whl"):
        name = wheel.name.split("-")[0].replace("_", "-")
        built[name] = wheel
    assert set(built) == {"omni-errors", *MEMBERS}
    return built


@pytest.fixture
def venv(tmp_path: Path, wheels: dict[str, Path]) -> Iterator[Callable[..., Path]]:
    made: list[Path] = []

    def make(*requirements: str, lock: Path = LOCK) -> Path:
        """A fresh venv with `requirements` (names with extras); each of ours comes from its wheel."""
        root = tmp_path / f"venv{len(made)}"
        subprocess.run(
            [_uv(), "venv", "--quiet", "--python", sys.executable, str(root)], check=True, timeout=120, env=CLEAN_ENV
        )
        python = root / "bin" / "python"
        # Our dependencies on each other resolve to these wheels too (the core and the CLI), never to an index.
        names = [r.split("[")[0] for r in requirements]
        needed = [*requirements, *(d for name in names for d in OURS[name] if d not in names)]
        specs = [f"{r} @ {wheels[r.split('[')[0]].as_uri()}" for r in dict.fromkeys(needed)]
        install = [_uv(), "pip", "install", "--quiet", "--python", str(python), *specs, "--constraint", str(lock)]
        if subprocess.run([*install, "--offline"], capture_output=True, timeout=900, env=CLEAN_ENV).returncode != 0:
            subprocess.run(install, check=True, timeout=1800, env=CLEAN_ENV)  # the cache missed a package: fetch it
        made.append(root)
        return python

    yield make
    for root in made:
        shutil.rmtree(root, ignore_errors=True)


def _run(python: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, timeout=600, check=check, env=CLEAN_ENV, cwd=python.parent
    )


def test_the_core_is_one_distribution_with_no_dependency_and_no_entry_point(venv: Callable[..., Path]) -> None:
    python = venv("omni-errors")
    out = json.loads(_run(python, "-c", CORE).stdout)
    assert out == {"dists": ["omni-errors"], "entry_points": [], "heavy": []}
    assert not (python.parent / "omni-errors").exists()  # the command comes with omni-errors-cli


def test_importing_every_core_module_patches_starts_and_registers_nothing(venv: Callable[..., Path]) -> None:
    python = venv("omni-errors[server,transport]")
    outside = python.parent.parent / "outside.json"
    outside.write_text(_run(python, "-c", LIST_OUTSIDE).stdout, encoding="utf-8")
    out = json.loads(_run(python, "-c", SIDE_EFFECTS, str(outside)).stdout)
    assert out["modules"] >= 40  # every module of the core was imported: the probe sees them
    assert out["changed"] == {}
    plugins = (
        "import importlib.metadata as m; print([e.dist.name for e in m.entry_points(group='vllm.general_plugins')])"
    )
    assert "omni" not in _run(python, "-c", plugins).stdout  # vLLM's own plugins only


@pytest.mark.parametrize("extra", list(PROBES))
def test_each_extra_imports_its_layer(venv: Callable[..., Path], extra: str) -> None:
    python = venv(f"omni-errors[{extra}]")
    probe = _run(python, "-c", PROBES[extra], check=False)
    assert probe.returncode == 0, probe.stderr[-3000:]


def test_the_audit_needs_only_the_standard_library(venv: Callable[..., Path]) -> None:
    python = venv("omni-errors-audit")
    dists = _run(
        python, "-c", "import importlib.metadata as m; print(sorted(d.metadata['Name'] for d in m.distributions()))"
    )
    assert dists.stdout.strip() == "['omni-errors-audit']"
    (python.parent.parent / "pkg").mkdir()
    (python.parent.parent / "pkg" / "m.py").write_text("def f():\n    raise ValueError('x')\n", encoding="utf-8")
    out = _run(python.parent / "omni-errors-audit", "../pkg", "--no-cache", "--no-progress", check=False)
    assert out.returncode == 1 and "new sites of gated rules: 1" in out.stdout, out.stdout + out.stderr


def test_the_command_line_names_the_distribution_of_a_missing_command(venv: Callable[..., Path]) -> None:
    python = venv("omni-errors-cli", "omni-errors-audit")
    command = python.parent / "omni-errors"
    assert _run(command, "--help").returncode == 0
    assert _run(command, "audit", "--rules").returncode == 0
    for name, dist in (
        ("serve", "omni-errors-tools"),
        ("bench", "omni-errors-tools"),
        ("doctor", "omni-errors-vllm-omni"),
    ):
        out = _run(command, name, check=False)
        assert out.returncode == 1 and "Traceback" not in out.stderr
        assert f"install it with: pip install {dist}" in out.stderr
    # The catalogue needs no extra (it names vLLM's classes without importing vLLM); `keys` needs pyzmq.
    catalog = _run(command, "catalog")
    assert catalog.stdout.startswith("# Error catalogue") and catalog.stderr == ""
    keys = _run(command, "keys", str(python.parent / "keys"), "serve", check=False)  # no transport extra here
    assert keys.returncode == 1 and "pip install 'omni-errors[transport]'" in keys.stderr


def test_the_tools_bring_the_reference_pipeline_and_its_commands(venv: Callable[..., Path]) -> None:
    python = venv("omni-errors-tools")
    probe = "import omni_errors_tools.pipeline.app, omni_errors_tools.pipeline.server, omni_errors_tools.bench, zmq"
    assert _run(python, "-c", probe, check=False).returncode == 0
    assert "--remote-stage" in _run(python.parent / "omni-errors", "serve", "--help").stdout


def test_the_plugin_in_a_vllm_omni_venv_says_enabled(venv: Callable[..., Path]) -> None:
    python = venv("omni-errors-vllm-omni", lock=OMNI_LOCK)
    doctor = _run(python.parent / "omni-errors", "doctor", check=False)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "enabled" in doctor.stdout
