"""Every patch factory resolves, and every private attribute a patch uses is in its entry's `relies_on`.

A patch reads upstream's private attributes (`client._engine_dead`), directly or through the
plugin's helpers it calls. Upstream may rename them in any release without changing the patched
function's own source, so its fingerprint would not notice: `relies_on` names them, and the drift
suite (test_manifest.py) checks each on the real class. This suite finds them: it follows each
factory through the plugin's modules (`ast`: every plugin function or class it names, directly or
through an import, and what those name in turn) and collects each `obj._name` it reads or writes
(and `getattr(obj, "_name")`). Not collected: the plugin's own names (an attribute of a module it
imports, `self._x` in a plugin class that sets `_x`), dunders, and the manifest's own targets (a
renamed target refuses the plugin by itself). Names are matched by name: which class `obj` is
cannot be known from the source.
"""

from __future__ import annotations

import ast
import importlib
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import omni_errors_vllm_omni
import pytest
from omni_errors_vllm_omni.manifest import TARGETS, Target

_PACKAGE = "omni_errors_vllm_omni"
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BY_NAME = ("getattr", "setattr", "hasattr", "delattr")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass
class _Module:
    """One plugin module: its top-level definitions and what each name it imports is."""

    name: str
    tree: ast.Module
    definitions: dict[str, ast.AST] = field(default_factory=dict)
    from_plugin: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (plugin module, name)
    plugin_modules: dict[str, str] = field(default_factory=dict)  # name -> plugin module
    ours: set[str] = field(default_factory=set)  # modules, and names of the core (omni_errors.*)

    def __post_init__(self) -> None:
        self.definitions = {n.name: n for n in self.tree.body if isinstance(n, _DEFINITIONS)}
        for node in ast.walk(self.tree):  # lazy imports inside functions too
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(f"{_PACKAGE}."):
                        self.plugin_modules[alias.asname or alias.name] = alias.name.rpartition(".")[2]
                    else:
                        self.ours.add(alias.asname or alias.name.partition(".")[0])
            elif isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    local = alias.asname or alias.name
                    if node.module == _PACKAGE:
                        self.plugin_modules[local] = alias.name
                    elif node.module.startswith(f"{_PACKAGE}."):
                        self.from_plugin[local] = (node.module.rpartition(".")[2], alias.name)
                    elif node.module.partition(".")[0] == "omni_errors":
                        self.ours.add(local)


class Reads:
    """The private attributes reached from a plugin function, over the plugin's modules' sources."""

    def __init__(self, sources: Mapping[str, str]) -> None:
        self.modules = {name: _Module(name, ast.parse(text)) for name, text in sources.items()}

    def defines(self, module: str, name: str) -> bool:
        return module in self.modules and name in self.modules[module].definitions

    def _names(self, module: _Module, node: ast.AST) -> tuple[str, str] | None:
        """The plugin definition `node` names, if it names one."""
        if isinstance(node, ast.Name):
            if node.id in module.definitions:
                return module.name, node.id
            return module.from_plugin.get(node.id)
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            if node.value.id in module.plugin_modules:
                return module.plugin_modules[node.value.id], node.attr
        return None

    def _sets(self, module: _Module, cls: ast.ClassDef) -> set[str]:
        """The names a plugin class (with its plugin bases) defines or assigns on `self`/`cls`."""
        names = {n.name for n in cls.body if isinstance(n, _DEFINITIONS)}
        for node in ast.walk(cls):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    for part in ast.walk(target):  # `self._a, self._b = ...` too
                        if isinstance(part, ast.Attribute) and isinstance(part.value, ast.Name):
                            if part.value.id in ("self", "cls"):
                                names.add(part.attr)
                        elif isinstance(part, ast.Name) and node in cls.body:
                            names.add(part.id)
        for base in cls.bases:
            named = self._names(module, base)
            if named and self.defines(*named):
                definition = self.modules[named[0]].definitions[named[1]]
                if isinstance(definition, ast.ClassDef):
                    names |= self._sets(self.modules[named[0]], definition)
        return names

    def _private_use(self, module: _Module, node: ast.AST, own: set[str]) -> str | None:
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name):
                if base.id in module.ours or base.id in module.plugin_modules:
                    return None  # a module's or the core's own name
                if base.id in module.definitions or base.id in module.from_plugin:
                    return None  # a plugin class's own attribute
                if base.id in ("self", "cls") and node.attr in own:
                    return None
            return node.attr
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _BY_NAME:
            if len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                return node.args[1].value if _private(node.args[1].value) else None
        return None

    def reached(self, module: str, name: str) -> dict[str, set[str]]:
        """Each private attribute used by `module:name` or what it reaches -> where ("module:def")."""
        found: dict[str, set[str]] = {}
        seen: set[tuple[str, str]] = set()
        todo = [(module, name)]
        while todo:
            key = todo.pop()
            if key in seen or not self.defines(*key):
                continue
            seen.add(key)
            current = self.modules[key[0]]
            for node, own in self._walk(current, current.definitions[key[1]], set()):
                named = self._names(current, node)
                if named is not None:
                    todo.append(named)
                attribute = self._private_use(current, node, own)
                if attribute is not None:
                    found.setdefault(attribute, set()).add(":".join(key))
        return found

    def _walk(self, module: _Module, node: ast.AST, own: set[str]) -> Iterator[tuple[ast.AST, set[str]]]:
        if isinstance(node, ast.ClassDef):
            own = self._sets(module, node)
        yield node, own
        for child in ast.iter_child_nodes(node):
            yield from self._walk(module, child, own)


@pytest.fixture(scope="module")
def plugin() -> Reads:
    directory = Path(omni_errors_vllm_omni.__file__).parent
    return Reads({path.stem: path.read_text(encoding="utf-8") for path in directory.glob("*.py")})


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.key)
def test_every_factory_resolves(target: Target, plugin: Reads) -> None:
    file, _, function = target.patch.partition(":")
    factory = getattr(importlib.import_module(f"{_PACKAGE}.{file}"), function, None)
    assert callable(factory), f"{target.patch} is not a function of {_PACKAGE}.{file}"
    assert plugin.defines(file, function), f"{target.patch} is not defined in {file}.py itself"


_TARGET_NAMES = {t.name for t in TARGETS}


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.key)
def test_every_private_attribute_a_patch_uses_is_in_its_relies_on(target: Target, plugin: Reads) -> None:
    relied_on = {entry.rpartition(":")[2].rpartition(".")[2] for entry in target.relies_on}
    used = plugin.reached(*target.patch.split(":"))
    missing = {name: sorted(where) for name, where in used.items() if name not in relied_on | _TARGET_NAMES}
    assert not missing, (
        f'{target.key}: add to relies_on ("Owner.name", module-qualified if not in {target.module}): {missing}'
    )


def test_the_reads_are_followed_through_helpers_and_modules() -> None:
    reads = Reads(
        {
            "patches": textwrap.dedent(
                """
                from omni_errors_vllm_omni.helpers import stop
                from omni_errors_vllm_omni import other
                import sys

                def make_thing(module, original):
                    def thing(self, *args):
                        self._direct = 1
                        stop(self)
                        other.check(self)
                        sys._getframe()
                        return original(self, *args)
                    return thing

                def make_unrelated(module, original):
                    return original._never
                """
            ),
            "helpers": textwrap.dedent(
                """
                class Watch:
                    def __init__(self):
                        self._mine, self._also = 1, 2

                    def read(self, client):
                        return self._mine + self._also + client._through_a_class

                def stop(client):
                    Watch().read(client)
                    return getattr(client, "_by_name", None)
                """
            ),
            "other": "def check(client):\n    return client._in_another_module\n",
        }
    )
    assert sorted(reads.reached("patches", "make_thing")) == [
        "_by_name",
        "_direct",
        "_in_another_module",
        "_through_a_class",
    ]
