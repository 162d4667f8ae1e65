"""The manifest against the installed vLLM-Omni 0.30.0, and the check that runs before any patch.

The drift suite starts no server: each entry's original is found and fingerprinted in the
installed sources and on the imported class, every attribute an entry relies on exists on the real
class, and every calling-context assumption holds in its caller's AST. The refusal and acceptance
tests edit a copy of the installed package and run `register()` on it in a fresh interpreter.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import inspect
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from omni_errors_vllm_omni.manifest import TARGETS, Hop, InExcept, Kind, Process, Target
from omni_errors_vllm_omni.verify import State, called_in_except, check, find_definition, fingerprint_node

RELEASE = importlib.metadata.version("vllm-omni")

# Importing vLLM-Omni's modules warns about what they import (vLLM's old api_server, audioop); the
# suite reads them, it does not judge their imports.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module", autouse=True)
def unpatched() -> None:
    """The originals, whether or not vLLM loaded the plugin into this process: `unapply()` restores them."""
    import omni_errors_vllm_omni as plugin

    plugin.unapply()


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    os.environ["OMNI_ERRORS_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    return {c.target.key: c for c in check()}


def _resolve(dotted: str) -> Any:
    module, _, qualname = dotted.partition(":")
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = getattr(value, part)
    return value


def _original(target: Target) -> Any:
    """The original as the defining module holds it (the target's module may be patched by now)."""
    module, qualname = target.source
    value: Any = importlib.import_module(module)
    for part in qualname.split("."):
        value = inspect.getattr_static(value, part)
    return value.__func__ if isinstance(value, (staticmethod, classmethod)) else value


def test_the_installed_release_is_the_one_the_manifest_was_written_against() -> None:
    pinned = [t for t in TARGETS if not t.public]
    assert all(RELEASE in t.fingerprints for t in pinned), f"no fingerprints recorded for vllm-omni {RELEASE}"
    assert all(not t.fingerprints for t in TARGETS if t.public), "a public API is checked for presence only"


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.key)
def test_every_entry_matches_the_installed_source(target: Target, checks: dict[str, Any]) -> None:
    result = checks[target.key]
    assert result.state is State.MATCHES, result.reason
    if not target.public:
        assert result.fingerprint == target.fingerprints[RELEASE]


def _definition(target: Target, original: Any) -> ast.AST:
    """The definition's AST as the process runs it: its source found by inspect (a constant's assignment
    is read from its module)."""
    if callable(original):
        return ast.parse(textwrap.dedent(inspect.getsource(original))).body[0]
    module, qualname = target.source
    node = find_definition(ast.parse(inspect.getsource(importlib.import_module(module))), qualname)
    assert node is not None
    return node


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.key)
def test_every_entry_names_the_real_attribute_and_its_definition(target: Target) -> None:
    module = importlib.import_module(target.module)
    owner = getattr(module, target.owner) if target.owner else module
    assert hasattr(owner, target.name)
    original = _original(target)
    # What the source check fingerprinted is what the process runs: the same AST, found by inspect.
    fingerprint = fingerprint_node(_definition(target, original))
    if not target.public:
        assert fingerprint == target.fingerprints[RELEASE]
    if target.defined_in is not None:  # imported into the target's module under the same name
        assert original.__module__ == target.source[0]
    file, _, function = target.patch.partition(":")
    assert callable(getattr(importlib.import_module(f"omni_errors_vllm_omni.{file}"), function))


def _has_attribute(cls: type, name: str) -> bool:
    """On the class (methods, class attributes, declared fields), or assigned `self.name = ...` in a
    method of a class of its MRO."""
    if hasattr(cls, name) or name in getattr(cls, "model_fields", {}) or name in getattr(cls, "__annotations__", {}):
        return True
    for klass in cls.__mro__:
        if klass is object:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
            for assigned in targets:
                if isinstance(assigned, ast.Attribute) and assigned.attr == name:
                    if isinstance(assigned.value, ast.Name) and assigned.value.id == "self":
                        return True
    return False


def _assigns(function: Any, path: str) -> bool:
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    return any(
        isinstance(node, ast.Assign) and any(ast.unparse(t) == path for t in node.targets) for node in ast.walk(tree)
    )


RELIED_ON = [(t, r) for t in TARGETS for r in t.relies_on]


@pytest.mark.parametrize(("target", "attribute"), RELIED_ON, ids=[f"{t.qualname}->{r}" for t, r in RELIED_ON])
def test_every_attribute_an_entry_relies_on_exists_on_the_real_class(target: Target, attribute: str) -> None:
    module, _, rest = attribute.rpartition(":")
    owner_name, _, path = rest.partition(".")
    owner = getattr(importlib.import_module(module or target.module), owner_name)  # classes are never replaced
    if not path:  # a name of the module itself (a class or a module it imports), found just above
        return
    if isinstance(owner, type):
        assert _has_attribute(owner, path), f"{owner.__qualname__} has no {path}"
    else:  # a function: the attribute path it assigns
        assert _assigns(owner, path), f"{owner_name} no longer assigns {path}"


CONTEXTS = [(t, c) for t in TARGETS for c in t.in_except]


@pytest.mark.parametrize(("target", "context"), CONTEXTS, ids=[f"{t.qualname}<-{c.caller}" for t, c in CONTEXTS])
def test_every_calling_context_holds_in_the_callers_source(target: Target, context: InExcept) -> None:
    caller = _resolve(context.caller)
    node = ast.parse(textwrap.dedent(inspect.getsource(caller))).body[0]
    assert called_in_except(node, context), f"{context} no longer holds"


def test_the_calling_context_check_can_fail() -> None:
    source = textwrap.dedent(
        """
        def run():
            try:
                work()
            except Exception:
                send(encode({"type": "error", "error": "x"}))
            send(encode({"type": "error", "error": "late"}))
            helper()
        """
    )
    node = find_definition(ast.parse(source), "run")
    assert node is not None
    assert not called_in_except(node, InExcept("m:run", "encode", error_frames=True))  # one frame outside
    assert called_in_except(node, InExcept("m:run", "send"))  # at least one call inside
    assert not called_in_except(node, InExcept("m:run", "helper"))  # never inside


def test_the_manifest_counts_what_the_docs_promise() -> None:
    assert len(TARGETS) == len({t.key for t in TARGETS}) == 65
    replaced = sorted(t.qualname for t in TARGETS if t.kind is Kind.REPLACE)
    assert replaced == sorted(
        [
            "StageDiffusionClient.shutdown",
            "OrchestratorBase._handle_stage_error",
            "_create_engine_error_json_response",
            "OmniBase._raise_nonfatal_error_message",
            "OmniOpenAIServingChat._create_error_response",
            "_video_error_from_exception",
            "_POLL_PERIOD_MS",
            "wait_for_diffusion_manager_liveness",
        ]
    )
    assert sorted(t.key for t in TARGETS if t.public) == [
        "zmq:Context.destroy",
        "zmq:Context.term",
        "zmq:Socket.bind",
        "zmq:Socket.connect",
    ]


def test_every_process_and_hop_names_a_target() -> None:
    assert {t.process for t in TARGETS} == set(Process)
    assert {t.hop for t in TARGETS} == set(Hop)


# -- refusal and acceptance, on a copy of the installed package (conftest's `package_copy`) ---------

_PROBE = r"""
import json, logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
import omni_errors_vllm_omni as plugin
from omni_errors_vllm_omni.hooks import pending
plugin.register()
status = plugin.status()
print(json.dumps({
    "decision": status.decision.value,
    "reason": status.reason,
    "hooked": pending(),
    "imported": sorted(m for m in ("vllm", "vllm_omni", "torch") if m in sys.modules),
    "states": {c.target.key: c.state.value for c in status.checks},
}))
"""


def _edit(package: Path, relative: str, old: str, new: str) -> str:
    path = package / relative
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not unique in {relative}"
    path.write_text(text.replace(old, new))
    return text


def _insert(package: Path, relative: str, qualname: str, statement: str) -> str:
    """Insert `statement` as the first line of `qualname`'s body; returns the file's original text."""
    path = package / relative
    text = path.read_text()
    node = find_definition(ast.parse(text), qualname)
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    lines = text.splitlines(keepends=True)
    first = node.body[0].lineno - 1
    indent = lines[first][: len(lines[first]) - len(lines[first].lstrip())]
    lines.insert(first, f"{indent}{statement}\n")
    path.write_text("".join(lines))
    return text


def _register_on(package: Path, tmp_path: Path) -> tuple[dict[str, Any], str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(package.parent),
        "OMNI_ERRORS_CACHE_DIR": str(tmp_path / "cache"),
        "OMNI_ERRORS_VLLM_OMNI": "1",
    }
    done = subprocess.run(
        [sys.executable, "-c", _PROBE], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


_API_SERVER = "vllm_omni.entrypoints.openai.api_server"
_EMIT = "vllm_omni.diffusion.diffusion_engine:DiffusionEngine._emit_outputs"


def test_a_changed_target_refuses_the_whole_plugin_with_one_log_line(package_copy: Path, tmp_path: Path) -> None:
    # A 0.30.x that changes a wrapped body, the way a bug fix would.
    original = _insert(package_copy, "diffusion/diffusion_engine.py", "DiffusionEngine._emit_outputs", "pass")
    try:
        report, stderr = _register_on(package_copy, tmp_path)
    finally:
        (package_copy / "diffusion/diffusion_engine.py").write_text(original)
    assert report["decision"] == "refused"
    assert report["reason"].startswith(f"{_EMIT} differs")
    assert [k for k, v in report["states"].items() if v != "matches"] == [_EMIT]
    assert report["hooked"] == {_API_SERVER: 1}, "a refused plugin patches nothing (it only publishes its metric)"
    assert report["imported"] == [], "the check imports nothing"
    lines = [line for line in stderr.splitlines() if "omni-errors" in line]
    assert len(lines) == 1 and "refused" in lines[0] and _EMIT in lines[0], stderr


def test_a_broken_calling_context_refuses_it_too(package_copy: Path, tmp_path: Path) -> None:
    # The inline client no longer builds its error output inside the `except`.
    relative = "diffusion/inline_stage_diffusion_client.py"
    source = (package_copy / relative).read_text()
    original = _edit(
        package_copy,
        relative,
        "            error_output = OmniRequestOutput.from_error(",
        "            error_output = _from_error(",
    )
    try:
        report, _ = _register_on(package_copy, tmp_path)
    finally:
        (package_copy / relative).write_text(original)
    assert source == original
    assert report["decision"] == "refused"
    assert report["states"]["vllm_omni.outputs:OmniRequestOutput.from_error"] == "differs"
    assert "calling context" in report["reason"]


def test_unrelated_edits_are_accepted(package_copy: Path, tmp_path: Path) -> None:
    # A 0.30.x that rewords a target's docstring and adds code the plugin does not patch.
    relative = "diffusion/diffusion_engine.py"
    original = _edit(
        package_copy,
        relative,
        '"""Emit output chunks for every request through the unified output stream."""',
        '"""Emit the output chunks of every request (reworded in a patch release)."""',
    )
    with (package_copy / relative).open("a") as f:
        f.write("\n\ndef helper_added_in_a_patch_release() -> int:\n    return 1\n")
    try:
        report, stderr = _register_on(package_copy, tmp_path)
    finally:
        (package_copy / relative).write_text(original)
    assert report["decision"] == "enabled", report["reason"]
    assert set(report["states"].values()) == {"matches"}
    hooked = {t.module: 1 for t in TARGETS} | {_API_SERVER: 2}  # each module's patches; the metric
    assert report["hooked"] == hooked
    assert report["imported"] == []
    assert sum("plugin enabled" in line for line in stderr.splitlines()) == 1


def test_doctor_names_the_changed_target_and_exits_3(package_copy: Path, tmp_path: Path) -> None:
    original = _insert(package_copy, "diffusion/diffusion_engine.py", "DiffusionEngine._emit_outputs", "pass")
    env = {**os.environ, "PYTHONPATH": str(package_copy.parent), "OMNI_ERRORS_CACHE_DIR": str(tmp_path)}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "omni_errors_cli", "doctor", "--json"],
            env={**env, "OMNI_ERRORS_VLLM_OMNI": "1"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        (package_copy / "diffusion/diffusion_engine.py").write_text(original)
    assert done.returncode == 3
    report = json.loads(done.stdout)
    assert report["decision"] == "refused" and report["fatal_exit_codes"] is None
    assert [t["target"] for t in report["targets"] if t["state"] == "differs"] == [_EMIT]


def test_the_cache_never_hides_an_edit(package_copy: Path, tmp_path: Path) -> None:
    first, _ = _register_on(package_copy, tmp_path)  # fills the cache
    assert first["decision"] == "enabled"
    original = _insert(package_copy, "diffusion/diffusion_engine.py", "DiffusionEngine._emit_outputs", "pass")
    try:
        edited, _ = _register_on(package_copy, tmp_path)  # the same cache: the file's stat changed
    finally:
        (package_copy / "diffusion/diffusion_engine.py").write_text(original)
    restored, _ = _register_on(package_copy, tmp_path)  # the same bytes as before: its facts are cached
    assert (edited["decision"], restored["decision"]) == ("refused", "enabled")
