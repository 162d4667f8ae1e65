"""The contract vLLM-Omni depends on (`omni_errors.contract`): the upstream series imports omni-errors
from it alone, and it holds exactly the names the series imports.

Read from every prefix of the series applied (`upstream_tree`), with `ast`: an import the series
adds anywhere else (a deep path, `_native`) fails here, whichever patch adds it."""

from __future__ import annotations

import ast
from pathlib import Path

import omni_errors.contract
import pytest
import upstream_tree


def _imports(tree: Path) -> dict[str, set[str]]:
    """module -> the names imported from it, over every omni-errors import of the tree's vllm_omni/."""
    found: dict[str, set[str]] = {}
    for path in sorted((tree / "vllm_omni").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "omni_errors" not in source:
            continue
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "omni_errors":
                found.setdefault(str(node.module), set()).update(alias.name for alias in node.names)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "omni_errors":
                        found.setdefault(alias.name, set()).add("*module*")
    return found


@pytest.fixture(scope="module")
def trees() -> list[Path]:
    count = len(upstream_tree.patches())
    return [upstream_tree.build(k if k < count else None) for k in range(1, count + 1)]


def test_every_prefix_of_the_series_imports_omni_errors_from_the_contract_alone(trees: list[Path]) -> None:
    for k, tree in enumerate(trees, start=1):
        others = {module: names for module, names in _imports(tree).items() if module != "omni_errors.contract"}
        assert others == {}, f"patches 1-{k} import omni-errors outside omni_errors.contract: {others}"


def test_the_contract_holds_exactly_what_the_series_imports(trees: list[Path]) -> None:
    imported = _imports(trees[-1]).get("omni_errors.contract", set())
    assert imported == set(omni_errors.contract.__all__)


def test_every_name_of_the_contract_resolves() -> None:
    for name in omni_errors.contract.__all__:
        assert getattr(omni_errors.contract, name) is not None, name
    assert set(omni_errors.contract.__all__) <= set(dir(omni_errors.contract))
    with pytest.raises(AttributeError, match="has no attribute 'process'"):
        omni_errors.contract.process  # noqa: B018 - a name outside the contract is not reachable through it
