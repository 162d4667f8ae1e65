"""The plugin's post-import hooks (omni_errors_vllm_omni.hooks) on real modules imported from disk.

The finder is on `sys.meta_path` only while a hook waits: once the last waiting module is imported,
or the last hook is cancelled, imports no longer pass through it.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest
from omni_errors_vllm_omni import hooks


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    for name in ("hooked_first", "hooked_second"):
        (tmp_path / f"{name}.py").write_text("VALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        for name in ("hooked_first", "hooked_second"):
            sys.modules.pop(name, None)


def test_a_hook_runs_after_the_import_and_the_finder_leaves_with_the_last(modules: Path) -> None:
    before = list(sys.meta_path)
    seen: list[str] = []

    def hook(module: ModuleType) -> None:
        seen.append(f"{module.__name__}={module.VALUE}")

    hooks.when_imported("hooked_first", hook)
    hooks.when_imported("hooked_second", hook)
    assert len(sys.meta_path) == len(before) + 1
    import hooked_first  # noqa: F401

    assert seen == ["hooked_first=1"] and len(sys.meta_path) == len(before) + 1  # one still waits
    import hooked_second  # noqa: F401

    assert seen == ["hooked_first=1", "hooked_second=1"]
    assert sys.meta_path == before and hooks.pending() == {}


def test_cancelling_the_last_hook_removes_the_finder(modules: Path) -> None:
    before = list(sys.meta_path)
    seen: list[str] = []

    def hook(module: ModuleType) -> None:
        seen.append(module.__name__)

    hooks.when_imported("hooked_first", hook)
    assert hooks.pending() == {"hooked_first": 1}
    hooks.cancel(hook)
    assert sys.meta_path == before and hooks.pending() == {}
    import hooked_first  # noqa: F401

    assert seen == []


def test_a_module_already_imported_is_hooked_at_once(modules: Path) -> None:
    import hooked_first  # noqa: F401

    before = list(sys.meta_path)
    seen: list[str] = []
    hooks.when_imported("hooked_first", lambda module: seen.append(module.__name__))
    assert seen == ["hooked_first"] and sys.meta_path == before


def test_a_hooked_module_keeps_its_loaders_whole_api(modules: Path) -> None:
    hooks.when_imported("hooked_first", lambda module: None)
    import hooked_first

    loader = hooked_first.__loader__
    assert loader.get_source("hooked_first") == "VALUE = 1\n"  # what tracebacks and inspect read
    assert loader.get_filename("hooked_first") == str(modules / "hooked_first.py")
    assert loader.is_package("hooked_first") is False
