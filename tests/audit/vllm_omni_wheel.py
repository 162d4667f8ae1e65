"""The vllm-omni 0.30.0 wheel, unpacked (never installed) into `.cache/vllm-omni-0.30.0/`: the real
code the audit is checked against. `python tests/audit/vllm_omni_wheel.py` (or `make audit-corpus`) fetches it;
the test fixture calls the same function. The wheel's SHA-256 is pinned, so every run audits the same
bytes."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.30.0"
WHEEL = f"vllm_omni-{VERSION}-py3-none-any.whl"
SHA256 = "141cb0c7b9c07970e5c92a99aab9696e81682dbfa3d2bfcde359c3c1533385f4"
CACHE = ROOT / ".cache" / f"vllm-omni-{VERSION}"
PACKAGE = CACHE / "vllm_omni"


def vllm_omni_tree() -> Path:
    """The unpacked `vllm_omni/` package folder, downloading the wheel on first use."""
    if (CACHE / ".complete").is_file():
        return PACKAGE
    with tempfile.TemporaryDirectory(prefix="vllm-omni-wheel-") as tmp:
        wheel = _download(Path(tmp))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != SHA256:
            raise RuntimeError(f"{wheel.name} has SHA-256 {digest}, expected {SHA256}")
        staging = Path(tmp) / "unpacked"
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(staging)
        if CACHE.exists():
            shutil.rmtree(CACHE)
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), CACHE)
    (CACHE / ".complete").write_text(SHA256 + "\n", encoding="utf-8")
    return PACKAGE


def _download(dest: Path) -> Path:
    """`pip download vllm-omni==0.30.0 --no-deps` with the first interpreter that has pip."""
    command = ["download", f"vllm-omni=={VERSION}", "--no-deps", "--only-binary=:all:", "-d", str(dest), "-q"]
    tried = []
    for python in dict.fromkeys([sys.executable, getattr(sys, "_base_executable", ""), shutil.which("python3") or ""]):
        if not python or not os.path.exists(python):
            continue
        tried.append(python)
        if subprocess.run([python, "-m", "pip", "--version"], capture_output=True, timeout=60, check=False).returncode:
            continue
        subprocess.run([python, "-m", "pip", *command], check=True, timeout=600)
        return dest / WHEEL
    raise RuntimeError(f"no interpreter with pip to download {WHEEL} (tried {tried})")


if __name__ == "__main__":
    print(vllm_omni_tree())
