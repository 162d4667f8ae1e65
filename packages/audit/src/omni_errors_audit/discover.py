"""Which files an audit reads, what their modules are called, and how reports name them.

A directory is walked for `*.py` files (directories whose name starts with a dot and `__pycache__`
are not entered; `--exclude` patterns drop more, and the report counts what they dropped). Module
names come from the package layout: below a root that is itself a package every folder is part of the
dotted name (vLLM-Omni has namespace folders without `__init__.py`); elsewhere a file's module starts at
the top-most folder of its `__init__.py` chain. Sites carry a *key path* inside the package
(`vllm_omni/entrypoints/...`), so a baseline holds wherever the tree is unpacked.
"""

from __future__ import annotations

import fnmatch
import importlib.util
import os
from collections.abc import Sequence
from pathlib import Path

from omni_errors_audit.model import AuditInputError, SourceFile

TOP = "(top)"  # the area of files directly in a root


def package_paths(name: str) -> list[str]:
    """The source folders (or module file) of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError) as exc:
        raise AuditInputError(f"no installed package named {name!r}: {exc}") from exc
    if spec is None:
        raise AuditInputError(f"no installed package named {name!r} (searched this interpreter's sys.path)")
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)
    if spec.origin and spec.origin.endswith(".py"):
        return [spec.origin]
    raise AuditInputError(f"package {name!r} has no Python source to audit ({spec.origin})")


def discover(paths: Sequence[str | Path], exclude: Sequence[str] = ()) -> tuple[list[str], list[SourceFile], int]:
    """(roots, files in path order, number of files excluded by `exclude`)."""
    namer = _Namer()
    roots: list[str] = []
    files: list[SourceFile] = []
    seen: set[str] = set()
    excluded = 0
    for given in paths:
        root = os.path.abspath(given)
        if not os.path.exists(root):
            raise AuditInputError(f"path does not exist: {given}")
        roots.append(root)
        is_file = os.path.isfile(root)
        found = _walk(root) if not is_file else [(root, os.path.basename(root))]
        if not found:  # a gate pointed at the wrong folder must fail, not pass on nothing
            raise AuditInputError(f"no .py file under {given}")
        for path, rel in found:
            if _excluded(rel, exclude):
                excluded += 1
            elif path not in seen:
                seen.add(path)
                files.append(namer.source(root, is_file, path, rel))
    if not files:
        raise AuditInputError(f"every .py file under {', '.join(map(str, paths))} is excluded by --exclude")
    return roots, files, excluded


def _walk(root: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    prefix = len(root.rstrip(os.sep)) + 1
    for folder, dirs, names in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        for name in sorted(names):
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                out.append((path, path[prefix:].replace(os.sep, "/")))
    return out


def _excluded(rel: str, patterns: Sequence[str]) -> bool:
    parts = rel.split("/")
    return any(fnmatch.fnmatch(rel, p) or any(fnmatch.fnmatch(part, p) for part in parts) for p in patterns)


class _Namer:
    """Module names, key paths and display paths, with the package lookups of one discovery memoised."""

    def __init__(self) -> None:
        self.cwd = os.getcwd().rstrip(os.sep) + os.sep
        self.packages: dict[str, tuple[str, ...]] = {}

    def source(self, root: str, root_is_file: bool, path: str, rel: str) -> SourceFile:
        is_package = os.path.basename(path) == "__init__.py"
        rel_parts = rel.split("/")
        if root_is_file:
            package = list(self.package_of(os.path.dirname(root)))
            key = "/".join([*package, rel])
            area = TOP
        else:
            area = rel_parts[0] if len(rel_parts) > 1 else TOP
            root_package = self.package_of(root)
            if root_package:  # every folder below a package root is part of the dotted name
                package = [*root_package, *rel_parts[:-1]]
                key = "/".join([*root_package, rel])
            else:
                package = list(self.package_of(os.path.dirname(path)))
                key = rel
        module = ".".join(package if is_package else [*package, rel_parts[-1][:-3]])
        # Relative to the working directory when inside it: what editors and CI annotations want.
        display = path[len(self.cwd) :] if path.startswith(self.cwd) else path
        return SourceFile(path, display, key, area, module, is_package)

    def package_of(self, folder: str) -> tuple[str, ...]:
        """The dotted name of `folder`, from its chain of `__init__.py` parents; () if not a package."""
        known = self.packages.get(folder)
        if known is not None:
            return known
        name: tuple[str, ...] = ()
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            parent = os.path.dirname(folder)
            name = (*(self.package_of(parent) if parent != folder else ()), os.path.basename(folder))
        self.packages[folder] = name
        return name
