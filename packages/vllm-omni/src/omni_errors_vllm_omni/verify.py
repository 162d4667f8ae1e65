"""Check the manifest against the installed sources, before anything is patched, without importing them.

Each target's original is found in its installed file (the package directory `find_spec` gives
for the top-level package, which imports nothing) and fingerprinted: the SHA-256 of its AST with
positions and docstrings dropped, so a reformatted or re-documented release still matches while a
changed body does not. A target also differs when a calling-context assumption (`InExcept`) no
longer holds in its caller's source.

Parsing the files the manifest names costs about a second on a busy machine, so results are cached by the
SHA-256 of each file's bytes, and each path's digest by its `stat` (`OMNI_ERRORS_CACHE_DIR`,
default `~/.cache/omni-errors`; an unwritable cache is skipped): a file unchanged since it was
last seen costs one `stat`.
"""

from __future__ import annotations

import ast
import enum
import hashlib
import importlib.util
import json
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from omni_errors_vllm_omni.manifest import TARGETS, InExcept, Target

__all__ = [
    "CACHE_ENV",
    "Check",
    "State",
    "called_in_except",
    "check",
    "find_definition",
    "fingerprint_node",
    "installed",
    "module_file",
]

#: Where verified facts are cached (a directory; created on first use).
CACHE_ENV = "OMNI_ERRORS_CACHE_DIR"
_CACHE_VERSION = 2


class State(enum.Enum):
    """How one target compares with the installed source."""

    MATCHES = "matches"
    #: the installed source shows the upstream change (`Target.upstreamed`): nothing to patch there.
    UPSTREAMED = "upstreamed"
    DIFFERS = "differs"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class Check:
    """One target's result: its state, the installed fingerprint (None when missing), and why."""

    target: Target
    state: State
    fingerprint: str | None
    reason: str


def module_file(module: str) -> Path | None:
    """The installed source file of `module`, found from its top-level package's directory."""
    loaded = sys.modules.get(module)
    if loaded is not None and getattr(loaded, "__file__", None):
        return Path(loaded.__file__)  # type: ignore[arg-type]
    top, _, rest = module.partition(".")
    try:
        spec = importlib.util.find_spec(top)  # a top-level name: located, never imported
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    parts = rest.split(".") if rest else []
    for root in spec.submodule_search_locations or ():
        base = Path(root).joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    if not parts and spec.origin:
        return Path(spec.origin)
    return None


def _strip_docstrings(node: ast.AST) -> None:
    for child in ast.walk(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            body = child.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    child.body = body[1:] or [ast.Pass()]


def fingerprint_node(node: ast.AST) -> str:
    """The fingerprint of a definition: positions, formatting and docstrings do not count."""
    _strip_docstrings(node)
    dump = ast.dump(node, annotate_fields=False, include_attributes=False)
    return hashlib.sha256(dump.encode()).hexdigest()[:16]


def _defines(stmt: ast.stmt, name: str) -> bool:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return stmt.name == name
    if isinstance(stmt, ast.Assign):  # a constant: `NAME = value`
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    if isinstance(stmt, ast.AnnAssign):
        return isinstance(stmt.target, ast.Name) and stmt.target.id == name
    return False


def find_definition(tree: ast.Module, qualname: str) -> ast.AST | None:
    """The definition named `qualname` ("Owner.name" or "name") at the top of `tree`: a function, a
    class, or a constant's assignment."""
    scope: Sequence[ast.stmt] = tree.body
    found: ast.stmt | None = None
    for part in qualname.split("."):
        found = None
        for stmt in scope:
            if _defines(stmt, part):
                found = stmt  # the last definition wins, as at run time
        if found is None:
            return None
        scope = getattr(found, "body", [])
    return found


def called_in_except(node: ast.AST, context: InExcept) -> bool:
    """Whether the caller's definition `node` makes its calls of `context.call` as `context` says."""

    def matches(call: ast.Call) -> bool:
        func = call.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if name != context.call:
            return False
        if not context.error_frames:
            return True
        first = call.args[0] if call.args else None
        return isinstance(first, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "type" and isinstance(v, ast.Constant) and v.value == "error"
            for k, v in zip(first.keys, first.values, strict=True)
        )

    inside, outside = 0, 0

    def visit(current: ast.AST, in_handler: bool) -> None:
        nonlocal inside, outside
        if isinstance(current, ast.Call) and matches(current):
            if in_handler:
                inside += 1
            else:
                outside += 1
        for child in ast.iter_child_nodes(current):
            visit(child, in_handler or isinstance(current, ast.ExceptHandler))

    visit(node, False)
    if context.error_frames:
        return inside > 0 and outside == 0
    return inside > 0


def _facts(path: Path, data: bytes, wanted: Iterable[str]) -> dict[str, str | bool | None]:
    """Parse `path` once and answer each wanted fact ("fp:Qual" or "ex:<InExcept as JSON>")."""
    tree = ast.parse(data, filename=str(path))
    facts: dict[str, str | bool | None] = {}
    for key in wanted:
        kind, _, arg = key.partition(":")
        if kind == "fp":
            node = find_definition(tree, arg)
            facts[key] = None if node is None else fingerprint_node(node)
        else:
            caller, call, frames = json.loads(arg)
            node = find_definition(tree, caller)
            facts[key] = None if node is None else called_in_except(node, InExcept(f"-:{caller}", call, frames))
    return facts


def _stat_key(path: Path) -> str | None:
    try:
        st = path.stat()
    except OSError:
        return None
    # ctime cannot be set back by tools that preserve mtimes: any rewrite of the file changes it.
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


class _Cache:
    """Facts by file digest, and each path's last digest by its `stat`, in one JSON file: a file
    unchanged since it was last seen is neither read nor parsed. Any failure to read or write the
    cache only costs a parse."""

    def __init__(self) -> None:
        root = os.environ.get(CACHE_ENV) or os.path.join(os.path.expanduser("~"), ".cache", "omni-errors")
        self.path = Path(root) / "vllm-omni-sources.json"
        self.dirty = False
        self.entries: dict[str, dict[str, str | bool | None]] = {}
        self.seen: dict[str, list[str]] = {}  # path -> [stat key, digest]
        try:
            loaded = json.loads(self.path.read_bytes())
            if loaded.get("version") == _CACHE_VERSION:
                self.entries, self.seen = dict(loaded["files"]), dict(loaded["paths"])
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass

    def facts(self, path: Path, wanted: set[str]) -> dict[str, str | bool | None] | None:
        stat = _stat_key(path)
        if stat is None:
            return None
        seen = self.seen.get(str(path))
        if seen is not None and seen[0] == stat:
            known = self.entries.get(seen[1])
            if known is not None and wanted <= known.keys():
                return known
        try:
            data = path.read_bytes()
        except OSError:
            return None
        digest = hashlib.sha256(data).hexdigest()
        self.seen[str(path)] = [stat, digest]
        self.dirty = True
        known = self.entries.get(digest)
        if known is not None and wanted <= known.keys():
            return known
        try:
            computed = _facts(path, data, wanted)
        except (SyntaxError, ValueError):
            return None
        self.entries[digest] = {**(known or {}), **computed}
        return self.entries[digest]

    def save(self) -> None:
        if not self.dirty:
            return
        live = {digest for _, digest in self.seen.values()}  # drop the facts of files no path has now
        entries = {digest: facts for digest, facts in self.entries.items() if digest in live}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"version": _CACHE_VERSION, "files": entries, "paths": self.seen}))
            os.replace(tmp, self.path)
        except OSError:
            pass


def installed(package: str = "vllm_omni", distribution: str = "vllm-omni") -> tuple[bool, str | None]:
    """Whether `package` is installed (a regular package, not a namespace), and its version: read
    from the `.dist-info` beside it (one directory listing), else from `importlib.metadata`."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False, None
    if spec is None or spec.origin is None:
        return False, None
    site = Path(spec.origin).parent.parent
    prefix = distribution.replace("-", "_") + "-"
    try:
        names = [e.name for e in os.scandir(site) if e.name.startswith(prefix) and e.name.endswith(".dist-info")]
    except OSError:
        names = []
    if len(names) == 1:
        return True, names[0][len(prefix) : -len(".dist-info")]
    from importlib.metadata import PackageNotFoundError, version

    try:
        return True, version(distribution)
    except PackageNotFoundError:
        return True, None


def _context_key(context: InExcept) -> tuple[str, str]:
    module, _, qualname = context.caller.partition(":")
    return module, "ex:" + json.dumps([qualname, context.call, context.error_frames])


def check(targets: Sequence[Target] = TARGETS) -> list[Check]:
    """Compare every target with the installed source; nothing is imported, nothing patched."""
    wanted: dict[str, set[str]] = {}
    for target in targets:
        module, qualname = target.source
        wanted.setdefault(module, set()).add("fp:" + qualname)
        if target.upstreamed:
            module, qualname = target.upstream_source
            wanted.setdefault(module, set()).add("fp:" + qualname)
        for context in target.in_except:
            caller_module, key = _context_key(context)
            wanted.setdefault(caller_module, set()).add(key)
    cache = _Cache()
    facts: dict[str, dict[str, str | bool | None] | None] = {}
    for module, keys in wanted.items():
        path = module_file(module)
        facts[module] = None if path is None else cache.facts(path, keys)
    cache.save()
    return [_judge(target, facts) for target in targets]


def _upstreamed(target: Target, facts: dict[str, dict[str, str | bool | None] | None]) -> Check | None:
    """The target's check when the installed source shows the upstream change, else None."""
    if not target.upstreamed:
        return None
    module, qualname = target.upstream_source
    fingerprint = (facts.get(module) or {}).get("fp:" + qualname)
    if not isinstance(fingerprint, str):
        fingerprint = None
    for release, expected in target.upstreamed.items():
        if fingerprint == expected:
            where = "deleted" if expected is None else f"{qualname} {fingerprint}"
            return Check(target, State.UPSTREAMED, fingerprint, f"the {release} series' change is in ({where})")
    return None


def _judge(target: Target, facts: dict[str, dict[str, str | bool | None] | None]) -> Check:
    upstreamed = _upstreamed(target, facts)
    if upstreamed is not None:
        return upstreamed
    module, qualname = target.source
    known = facts.get(module)
    if known is None:
        return Check(target, State.MISSING, None, f"{module} is not installed (or not readable)")
    fingerprint = known.get("fp:" + qualname)
    if not isinstance(fingerprint, str):
        return Check(target, State.MISSING, None, f"{module} defines no {qualname}")
    if target.public:  # another library's documented API: wrapped alike whatever its version
        return Check(target, State.MATCHES, fingerprint, "a public API (present)")
    if fingerprint not in target.fingerprints.values():
        known_as = ", ".join(f"{release} {fp}" for release, fp in target.fingerprints.items())
        return Check(target, State.DIFFERS, fingerprint, f"its source changed (fingerprint {fingerprint}; {known_as})")
    for context in target.in_except:
        caller_module, key = _context_key(context)
        held = (facts.get(caller_module) or {}).get(key)
        if held is not True:
            what = "is missing" if held is None else "no longer holds"
            return Check(target, State.DIFFERS, fingerprint, f"its calling context {what}: {context}")
    return Check(target, State.MATCHES, fingerprint, "matches " + ", ".join(target.fingerprints))
