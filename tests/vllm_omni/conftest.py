"""The vLLM-Omni suite: the real `vllm-omni serve --omni` on CPU, with the plugin off and on.

It runs in the vLLM 0.30 + vllm-omni 0.30 environment (`make test-omni`); elsewhere it is skipped.
The fake diffusion executor comes from the test-only plugin in `fake_diffusion/`, and the LLM
stages' fake executor under vLLM's real EngineCore from `fake_llm/` (both installed by `make
build-omni`). Each module starts its servers once (`omni_server.serve`); each server is ended,
with every process it started, on every path (`OmniServer.close`).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import shutil
from pathlib import Path
from typing import Any

import pytest

collect_ignore = ["fake_diffusion", "fake_llm"]
_TEST_PLUGINS = ("omni_errors_fake_diffusion", "omni_errors_fake_llm")

try:  # not find_spec: this directory itself is a namespace package named vllm_omni on the test path
    importlib.metadata.version("vllm-omni")
except importlib.metadata.PackageNotFoundError:
    collect_ignore_glob = ["test_*.py"]  # the vLLM 0.33 environment: nothing to run against
else:
    _installed = {ep.name for ep in importlib.metadata.entry_points(group="vllm.general_plugins")}
    _missing = [name for name in _TEST_PLUGINS if name not in _installed]
    if _missing:  # pragma: no cover - a setup mistake, not a test outcome
        raise pytest.UsageError(f"the test plugins {', '.join(_missing)} are not installed: run `make build-omni`")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A module's first test also starts its server: minutes on two shared cores, not seconds (an
    LLM pipeline's, one stage process after another: up to `omni_server.llm_server`'s bound)."""
    for item in items:
        if "vllm_omni" in item.nodeid:
            item.add_marker(pytest.mark.timeout(2400 if "llm" in item.path.name else 900))


@pytest.fixture(scope="module")
def package_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the installed vllm_omni package, for a test to edit (and restore) and import with
    PYTHONPATH set to its parent: a release that differs, made of the real sources."""
    spec = importlib.util.find_spec("vllm_omni")
    assert spec is not None and spec.submodule_search_locations
    root = tmp_path_factory.mktemp("site")
    shutil.copytree(
        next(iter(spec.submodule_search_locations)), root / "vllm_omni", ignore=shutil.ignore_patterns("__pycache__")
    )
    return root / "vllm_omni"


# The upstream series' suites (test_upstream_*.py) share these: each probe takes minutes.
@pytest.fixture(scope="session")
def prefixes() -> list[Path]:
    """Every prefix of the series applied (patch 1, patches 1-2, ...), each `--check`ed first: the
    trees `make upstream-tree` built, or built here when the series' bytes differ from theirs."""
    import upstream_tree

    count = len(upstream_tree.patches())
    return [upstream_tree.build(k if k < count else None) for k in range(1, count + 1)]


@pytest.fixture(scope="session")
def on_the_series(prefixes: list[Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One probe on the whole series' tree, without the plugin's patches (`upstream_probe`)."""
    from upstream_probe import COMPARED, run_probe

    return run_probe(prefixes[-1], tmp_path_factory.mktemp("series-probe"), *COMPARED)


@pytest.fixture(scope="session")
def on_the_release(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One probe on the release with the plugin's patches, for the tests that compare it with the series."""
    import upstream_tree
    from upstream_probe import COMPARED, run_probe

    return run_probe(upstream_tree.vllm_omni_tree().parent, tmp_path_factory.mktemp("release-probe"), *COMPARED)
