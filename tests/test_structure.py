"""The packages' shape: which distribution may import which, no import cycle, no private name used
across modules, one size budget.

Static (AST) checks of every distribution's package (python/omni_errors, packages/*/src/*) and
rust/src: cheap, and they need none of the heavy dependencies. The Rust half checks sizes only.
The cycle check counts every import: module level, inside functions (late imports still tie two
modules together) and under `if TYPE_CHECKING:` (a type back-reference is a dependency all the
same); a circle is accepted only from `ALLOWED_CYCLES`, with its reason.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Each distribution's package: the core, and those of packages/ (the CLI, the audit, the tools, the plugin).
PACKAGES = [ROOT / "python" / "omni_errors", *sorted(ROOT.glob("packages/*/src/*"))]
RUST = ROOT / "rust" / "src"
TESTS = Path(__file__).resolve().parent
#: One budget for both languages: lines per Python module or Rust source file (a Rust file's inline
#: `#[cfg(test)]` module is not counted: Python keeps its tests in tests/, outside the budget too).
MAX_LINES = 400
#: Files allowed past the budget, each with its reason.
OVER_BUDGET = {
    "rust/src/sanitize/lexicon.rs": "word tables (data): splitting would split one table",
    "rust/src/sanitize/tokens.rs": "a table of 41 token formats and letter pairs (data) with the one scanner over it",
}
#: Import circles accepted, as the set of modules in the circle -> why. None today.
ALLOWED_CYCLES: dict[frozenset[str], str] = {}


def _module_name(package: Path, path: Path) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(package, p): p for package in PACKAGES for p in sorted(package.rglob("*.py"))}


def _resolve(module: str, level: int, current: str, is_package: bool) -> str:
    if level == 0:
        return module
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, module] if module else base)


def _imports(name: str, path: Path) -> set[str]:
    """omni_errors modules `name` imports anywhere: module level, in functions, under TYPE_CHECKING."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Import):
            found.update(a.name for a in sub.names)
        elif isinstance(sub, ast.ImportFrom):
            target = _resolve(sub.module or "", sub.level, name, path.name == "__init__.py")
            for alias in sub.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in MODULES else target)
    return {m for m in found if m in MODULES and m != name}


def test_no_import_cycle() -> None:
    graph = {name: _imports(name, path) for name, path in MODULES.items()}
    # A package's __init__ importing its own submodules is the package's table of contents; a child
    # importing a sibling implies its parent package, which is not an edge back to the child.
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1 and frozenset(stack[stack.index(nxt) :]) not in ALLOWED_CYCLES:
                pytest.fail("import cycle: " + " -> ".join([*stack[stack.index(nxt) :], nxt]))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


#: What each distribution's package may import of the others: the core nothing above it (vLLM-Omni
#: imports it: no plugin, no tool comes with it); the audit nothing at all (the standard library only).
MAY_IMPORT = {
    "omni_errors": set(),
    "omni_errors_audit": set(),
    "omni_errors_cli": {"omni_errors"},
    "omni_errors_tools": {"omni_errors", "omni_errors_cli"},  # a dependency: its commands' help formatter
    "omni_errors_vllm_omni": {"omni_errors"},
}


def test_each_distribution_imports_only_what_it_depends_on() -> None:
    assert {p.name for p in PACKAGES} == set(MAY_IMPORT)
    crossing = [
        f"{name} imports {imported}"
        for name, path in MODULES.items()
        for imported in sorted(_imports(name, path))
        if (own := name.split(".")[0]) != (other := imported.split(".")[0]) and other not in MAY_IMPORT[own]
    ]
    # Nor a private module of another (the extension, `omni_errors._native`, is the core's own).
    crossing += [
        f"{name} imports {node.module}"
        for name, path in MODULES.items()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.split(".")[0] in MAY_IMPORT.keys() - {name.split(".")[0]}
        and any(part.startswith("_") for part in node.module.split(".")[1:])
    ]
    assert crossing == []


def _foreign_private_reads(path: Path) -> list[str]:
    """Private attributes `path` reads or writes on objects other than its own (`self`, `cls`,
    `super()`): `x._name`, or `getattr(x, "_name")` and its kin with a literal name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
            owner = node.value
            own = isinstance(owner, ast.Name) and owner.id in ("self", "cls")
            if not own and not (isinstance(owner, ast.Call) and ast.unparse(owner.func) == "super"):
                found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
        elif (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
            and isinstance(name := node.args[1], ast.Constant)
            and str(name.value).startswith("_")
            and not str(name.value).startswith("__")
        ):
            found.append(f"{path.name}:{node.lineno} {ast.unparse(node)}")
    return found


def test_no_core_module_reads_anothers_private_attribute() -> None:
    """vLLM-Omni hands the core its state as values or callables (`omni_errors.contract`): the core
    reads no private field of `AsyncOmni`, nor of anything it does not own."""
    core = [path for name, path in MODULES.items() if name.split(".")[0] == "omni_errors"]
    assert len(core) > 40  # the check sees the core
    assert [use for path in core for use in _foreign_private_reads(path)] == []


#: Packages that are siblings above the core: neither imports the other (what both need, the fatal
#: policy and the ZMQ security among it, is in the core below them).
SIBLINGS = ("omni_errors_tools.lifecycle", "omni_errors_vllm_omni")


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_the_reference_lifecycle_and_the_plugin_are_siblings() -> None:
    crossing = [
        f"{name} imports {imported}"
        for name, path in MODULES.items()
        for imported in sorted(_imports(name, path))
        for own, other in (SIBLINGS, SIBLINGS[::-1])
        if _in(name, own) and _in(imported, other)
    ]
    assert crossing == []


#: Where a value from outside becomes typed: the only modules that may build an `ExitCode` from a
#: variable, or set a record's request id with `replace`. Everywhere else uses their helpers.
PARSERS = {"ExitCode": "omni_errors.fatal.exitcodes", "request_id": "omni_errors.semantics.ids"}


def _conversions(path: Path) -> list[tuple[str, int]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name == "ExitCode" and not all(isinstance(arg, ast.Constant) for arg in node.args):
            found.append(("ExitCode", node.lineno))
        if name == "replace" and any(k.arg == "request_id" for k in node.keywords):
            found.append(("request_id", node.lineno))
    return found


def test_exit_codes_and_request_ids_are_converted_only_by_their_parsers() -> None:
    outside = [
        f"{name}:{line} ({what})"
        for name, path in MODULES.items()
        for what, line in _conversions(path)
        if name != PARSERS[what]
    ]
    assert outside == []
    assert all(_conversions(MODULES[module]) for module in PARSERS.values())  # the check sees them


def _private_uses(path: Path, current: str) -> list[str]:
    tree = ast.parse(path.read_text())
    found = []
    modules_bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("omni_errors")) or (
            isinstance(node, ast.ImportFrom) and node.level
        ):
            target = _resolve(node.module or "", node.level, current, path.name == "__init__.py")
            for alias in node.names:
                full = f"{target}.{alias.name}"
                if full in MODULES:
                    modules_bound[alias.asname or alias.name] = full
                elif alias.name.startswith("_") and not alias.name.startswith("__") and target != current:
                    found.append(f"{path.name}:{node.lineno} imports {alias.name} from {target}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("omni_errors") and alias.asname:
                    modules_bound[alias.asname] = alias.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules_bound
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(f"{path.name}:{node.lineno} uses {modules_bound[node.value.id]}.{node.attr}")
    return found


def test_no_private_name_used_across_modules() -> None:
    uses = [u for name, path in MODULES.items() for u in _private_uses(path, name)]
    uses += [u for path in sorted(TESTS.rglob("*.py")) for u in _private_uses(path, "tests")]
    assert uses == []


def _budgeted_lines(path: Path) -> int:
    lines = path.read_text().splitlines()
    if path.suffix == ".rs" and "#[cfg(test)]" in lines:
        lines = lines[: lines.index("#[cfg(test)]")]
    return len(lines)


def test_one_size_budget_for_python_and_rust() -> None:
    files = [*MODULES.values(), *RUST.rglob("*.rs")]
    over = {str(p.relative_to(ROOT)): n for p in files if (n := _budgeted_lines(p)) > MAX_LINES}
    assert set(over) <= set(OVER_BUDGET), {k: v for k, v in over.items() if k not in OVER_BUDGET}
    stale = set(OVER_BUDGET) - set(over)
    assert not stale, f"within the budget now: remove from OVER_BUDGET: {sorted(stale)}"


def test_every_light_module_imports_alone() -> None:
    """The modules that must stay light import in a fresh interpreter without torch or vLLM."""
    light = [
        "omni_errors",
        "omni_errors.errors",
        "omni_errors.semantics.http_status",
        "omni_errors.semantics.rules",
        "omni_errors.semantics.core_table",
        "omni_errors.semantics.reporting",
        "omni_errors.embed",
        "omni_errors.semantics.legacy",
        "omni_errors_cli",
        "omni_errors_tools.lifecycle",
        "omni_errors_tools.chaos.command",
        "omni_errors_tools.chaos.harness",
        "omni_errors_tools.pipeline.faults",
    ]
    probe = (
        "import importlib, json, sys\n"
        f"for name in {light!r}:\n"
        "    importlib.import_module(name)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'vllm', 'fastapi'})))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"
