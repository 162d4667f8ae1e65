"""The upstream series (`upstream/vllm-omni/0.30.0/*.patch`) applied to the unpacked 0.30.0 wheel.

`python tests/vllm_omni/upstream_tree.py` (or `make upstream-tree`) copies the wheel's `vllm_omni/`
(`make audit-corpus` unpacks it) into `.cache/vllm-omni-0.30.0-upstream/` and applies every patch in
order, each with `git apply --check` first: `git apply` takes no fuzz, so a patch whose context
does not match exactly fails the build. `--prefixes` also applies every prefix of the series
(patch 1, patches 1-2, ...) into a copy of its own, `.cache/vllm-omni-0.30.0-upstream-K/`, for the
tests of a series merged one patch at a time. The patched package is put first on the path of
`.venv-omni` (`PYTHONPATH`) rather than installed: the same torch and vLLM serve both trees.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "audit"))

from vllm_omni_wheel import CACHE, VERSION, vllm_omni_tree  # noqa: E402

SERIES = ROOT / "upstream" / "vllm-omni" / VERSION
TREE = CACHE.with_name(f"vllm-omni-{VERSION}-upstream")
_MARK = ".series"


def patches() -> list[Path]:
    """The series, in order (the numbered `git format-patch` names sort so)."""
    return sorted(SERIES.glob("[0-9][0-9][0-9][0-9]-*.patch"))


def _digest(series: list[Path]) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in series)).hexdigest()


def _git_apply(root: Path, patch: Path, *extra: str) -> None:
    # The tree lies inside this repository's work tree: without the ceiling, git would find this
    # repository and silently skip every path outside the current directory (all of them).
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(root.parent)}
    done = subprocess.run(
        ["git", "apply", "--whitespace=error-all", *extra, str(patch)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode:
        what = "is not applied" if "--reverse" in extra else "does not apply cleanly" if extra else "failed to apply"
        raise RuntimeError(f"{patch.name} {what} on {root}:\n{done.stderr.strip()}")


def build(count: int | None = None, dest: Path | None = None) -> Path:
    """The tree with the first `count` patches (all by default) applied; returns the folder to put on
    the path (holding `vllm_omni/`). Rebuilt only when the series' bytes changed."""
    series = patches()[:count] if count is not None else patches()
    dest = dest or (TREE if count is None else TREE.with_name(f"{TREE.name}-{count}"))
    digest = _digest(series)
    if (dest / _MARK).is_file() and (dest / _MARK).read_text().strip() == digest:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    staging = dest.with_name(dest.name + ".tmp")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    shutil.copytree(vllm_omni_tree(), staging / "vllm_omni")
    for patch in series:  # each patch checked on the tree its predecessors made: every prefix applies
        _git_apply(staging, patch, "--check")
        _git_apply(staging, patch)
        _git_apply(staging, patch, "--check", "--reverse")  # it did change the tree
    (staging / _MARK).write_text(digest + "\n")
    staging.rename(dest)
    return dest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prefixes", action="store_true", help="also build every prefix of the series")
    args = parser.parse_args()
    series = patches()
    if not series:
        raise SystemExit(f"no patches in {SERIES}")
    if args.prefixes:
        for count in range(1, len(series)):
            print(build(count))
    print(build())


if __name__ == "__main__":
    main()
