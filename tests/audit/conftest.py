"""Shared audit fixtures: a tiny package written from snippets, and the real vllm-omni 0.30.0 tree."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from audit_helpers import AuditSnippets, WriteTree
from omni_errors_audit import AuditReport, audit
from vllm_omni_wheel import vllm_omni_tree


@pytest.fixture
def write_tree(tmp_path: Path) -> WriteTree:
    """Write {relative path: source} under tmp_path/pkg (a package) and return the package folder."""

    def write(files: dict[str, str]) -> Path:
        package = tmp_path / "pkg"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").touch()
        for rel, text in files.items():
            path = package / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text), encoding="utf-8")
        return package

    return write


@pytest.fixture
def audit_snippets(write_tree: WriteTree) -> AuditSnippets:
    """Audit snippets in-process, without cache or pool: `audit_snippets({"mod.py": src})`."""

    def run(files: dict[str, str], **options: object) -> AuditReport:
        return audit([write_tree(files)], use_cache=False, jobs=1, progress=False, **options)  # type: ignore[arg-type]

    return run


@pytest.fixture(scope="session")
def vllm_omni_package() -> Path:
    """The unpacked vllm-omni 0.30.0 wheel (downloaded once into .cache/, then reused)."""
    return vllm_omni_tree()
