"""The light install and each extra, proven on fresh venvs: the wheel is built once per session
(`maturin build --release`), each venv made with `uv venv` and filled with `uv pip install
'omni-errors[EXTRA] @ wheel'`, pinned to `requirements.lock` so every package comes from the warm
uv cache (offline first; online only if the cache misses). Each probe imports its layer.
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
HEAVY = ("torch", "vllm", "fastapi", "msgpack", "msgspec", "zmq", "prometheus_client")
# The venvs must see only what was installed into them, never this checkout's sources.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}

CORE = f"""
import importlib.metadata as md, json, sys
import omni_errors, omni_errors.embed, omni_errors.errors, omni_errors.semantics.legacy
d = omni_errors.OmniErrorDetails("stage 1 died at /srv/x.py", "server", 500, "InternalServerError", stage_id=1)
assert omni_errors.decode(omni_errors.encode(d)) == d and "/srv" not in d.message
assert omni_errors.semantics.legacy.from_legacy({{"error": "x", "status_code": 404}}).category == "client"
dists = sorted(dist.metadata["Name"] for dist in md.distributions())
print(json.dumps({{"dists": dists, "heavy": sorted(m for m in {HEAVY!r} if m in sys.modules)}}))
"""
PROBES = {
    "bench": "import omni_errors.bench, msgspec, msgpack, cloudpickle",
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
    "pipeline": "import omni_errors.pipeline.app, omni_errors.pipeline.server, omni_errors.pipeline.models, zmq",
}


def _uv() -> str:
    return shutil.which("uv", path=str(BIN)) or shutil.which("uv") or pytest.skip("uv is not installed")


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    maturin = shutil.which("maturin", path=str(BIN)) or "maturin"
    subprocess.run(
        [maturin, "build", "--release", "--quiet", "--interpreter", sys.executable, "--out", str(out)],
        cwd=ROOT,
        check=True,
        timeout=1800,
        env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"},
    )
    [built] = out.glob("*.whl")
    return built


@pytest.fixture
def venv(tmp_path: Path, wheel: Path) -> Iterator[Callable[[str], Path]]:
    made: list[Path] = []

    def make(extra: str) -> Path:
        root = tmp_path / (extra or "core")
        subprocess.run(
            [_uv(), "venv", "--quiet", "--python", sys.executable, str(root)], check=True, timeout=120, env=CLEAN_ENV
        )
        python = root / "bin" / "python"
        spec = f"omni-errors[{extra}] @ {wheel.as_uri()}" if extra else f"omni-errors @ {wheel.as_uri()}"
        install = [_uv(), "pip", "install", "--quiet", "--python", str(python), spec, "--constraint", str(LOCK)]
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


def test_core_has_no_dependency_and_bench_says_what_to_install(venv: Callable[[str], Path]) -> None:
    python = venv("")
    out = json.loads(_run(python, "-c", CORE).stdout)
    assert out == {"dists": ["omni-errors"], "heavy": []}
    bench = _run(python.parent / "omni-errors", "bench", check=False)
    assert bench.returncode == 1 and "Traceback" not in bench.stderr
    assert "pip install 'omni-errors[bench]'" in bench.stderr
    assert _run(python.parent / "omni-errors", "--help").returncode == 0


@pytest.mark.parametrize("extra", list(PROBES))
def test_each_extra_imports_its_layer(venv: Callable[[str], Path], extra: str) -> None:
    python = venv(extra)
    probe = _run(python, "-c", PROBES[extra], check=False)
    assert probe.returncode == 0, probe.stderr[-3000:]
