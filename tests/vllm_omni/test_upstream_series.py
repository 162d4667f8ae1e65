"""The upstream series (`upstream/vllm-omni/0.30.0`, docs/upstream.md) against the manifest and the plugin.

Without a server: every prefix of the series applies cleanly to the 0.30.0 wheel's sources; the
targets the series retires show their recorded fingerprints after it (and not before), every other
target keeps a fingerprint the plugin accepts, and its calling contexts still hold, on every
prefix; on patch 1 alone and on the whole series, `register()` patches exactly the targets not yet
upstreamed (each probe imports every target module: minutes). On the patched tree itself
(`make upstream-test`, which puts it first on the path): `omni-errors doctor` says so. The suites
beside this one (`test_upstream_*.py`, by the plugin's modules) show vLLM-Omni's own retired code
doing what the plugin did; `make upstream-test` then runs the *after* suites on the same tree.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import upstream_tree
from omni_errors_vllm_omni.manifest import TARGETS, Target
from omni_errors_vllm_omni.verify import called_in_except, find_definition
from upstream_probe import IN_TREE, ON_TREE, RELEASE, RETIRED, fingerprint_of, retired_on, retires_of, run_probe


def test_the_series_is_numbered_and_every_prefix_applies_cleanly(prefixes: list[Path]) -> None:
    names = [p.name for p in upstream_tree.patches()]
    assert names and [n[:4] for n in names] == [f"{i:04d}" for i in range(1, len(names) + 1)]
    assert len(prefixes) == len(names)


def test_each_patch_says_what_it_retires_fixes_tests_and_notes() -> None:
    retired: list[str] = []
    for patch in upstream_tree.patches():
        text = patch.read_text()
        assert text.splitlines()[1] == "From: omni-errors <omni-errors@localhost>", f"{patch.name}: its author"
        for heading in ("RFC phase", "Retires (omni-errors manifest):", "Fixes:", "Tests:", "Release note:", "Size:"):
            assert heading in text, f"{patch.name} has no {heading!r}"
        retired += retires_of(patch)
    assert sorted(retired) == sorted(t.key for t in RETIRED), "each retired entry is named by one patch"


@pytest.mark.parametrize("target", RETIRED, ids=lambda t: t.key)
def test_a_retired_target_shows_its_upstream_fingerprint_after_the_series_only(
    target: Target, prefixes: list[Path]
) -> None:
    module, qualname = target.upstream_source
    release = fingerprint_of(upstream_tree.vllm_omni_tree().parent, module, qualname)
    assert release != target.upstreamed[RELEASE], "the release itself must not read as upstreamed"
    assert fingerprint_of(prefixes[-1], module, qualname) == target.upstreamed[RELEASE]


@pytest.mark.parametrize("target", RETIRED, ids=lambda t: t.key)
def test_a_target_once_retired_stays_retired_on_every_later_prefix(target: Target, prefixes: list[Path]) -> None:
    """A later patch may change the place an earlier one's change is read at (patch 25 changes the
    `run_loop` where patch 19 put the death notice): the manifest must know each fingerprint it takes,
    or the plugin would patch the target again on the trees between."""
    states = [fingerprint_of(tree, *target.upstream_source) in target.upstreamed.values() for tree in prefixes]
    first = states.index(True)
    assert all(states[first:]), (
        f"retired by patch {first + 1}, not on prefixes {[i + 1 for i, s in enumerate(states) if i > first and not s]}"
    )


@pytest.mark.parametrize("target", IN_TREE, ids=lambda t: t.key)
def test_until_its_patch_a_target_keeps_a_fingerprint_the_plugin_accepts(target: Target, prefixes: list[Path]) -> None:
    """On every prefix before the patch that retires it (on all of them, for a target the series
    leaves), a target's source and its calling contexts are ones the plugin patches."""
    waiting = [tree for tree in prefixes if not retired_on(tree, target)]
    for tree in waiting:
        assert fingerprint_of(tree, *target.source) in target.fingerprints.values(), tree.name
        for context in target.in_except:
            module, _, caller = context.caller.partition(":")
            path = tree.joinpath(*module.split(".")).with_suffix(".py")
            node = find_definition(ast.parse(path.read_bytes()), caller)
            assert node is not None and called_in_except(node, context), f"{tree.name}: {context}"


@pytest.mark.parametrize("count", [1, None], ids=["prefix-1", "whole-series"])
def test_register_patches_exactly_the_targets_not_yet_upstreamed(
    count: int | None, prefixes: list[Path], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    tree = prefixes[(count or len(prefixes)) - 1]
    report = run_probe(tree, tmp_path) if count is not None else request.getfixturevalue("on_the_series")
    assert report["vllm_omni"].startswith(str(tree))
    upstreamed = {t.key for t in RETIRED if fingerprint_of(tree, *t.upstream_source) == t.upstreamed[RELEASE]}
    assert upstreamed  # every prefix retires something
    assert report["decision"] == "enabled"
    assert f"{len(upstreamed)} are upstreamed (nothing patched there)" in report["reason"]
    expected = {t.key for t in TARGETS if t.key not in upstreamed}  # zmq too: vLLM-Omni imports it
    assert set(report["patched"]) == expected


@pytest.mark.skipif(ON_TREE is None, reason="needs the patched tree first on the path (make upstream-test)")
def test_doctor_on_the_patched_tree_says_upstreamed_per_target(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "omni_errors_cli", "doctor", "--json"],
        env={**os.environ, "OMNI_ERRORS_CACHE_DIR": str(tmp_path), "OMNI_ERRORS_VLLM_OMNI": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    states = {t["target"]: t["state"] for t in report["targets"]}
    assert {k for k, s in states.items() if s == "upstreamed"} == {t.key for t in RETIRED}
    assert {s for k, s in states.items() if s != "upstreamed"} == {"matches"}
    assert report["decision"] == "enabled"


def test_every_target_upstreamed_is_the_upstreamed_decision(monkeypatch: pytest.MonkeyPatch) -> None:
    """The series' last step: nothing left to patch. `decide` judges the checks `verify` returns."""
    import omni_errors_vllm_omni as plugin
    from omni_errors_vllm_omni.doctor import EXIT_STATUS
    from omni_errors_vllm_omni.verify import Check, State

    monkeypatch.setattr(plugin, "check", lambda: [Check(t, State.UPSTREAMED, None, "in") for t in TARGETS])
    monkeypatch.setenv(plugin.ENV_VAR, "1")
    decided = plugin.decide()
    assert decided.decision is plugin.Decision.UPSTREAMED
    assert decided.reason == f"all {len(TARGETS)} targets are upstreamed: nothing to patch"
    assert EXIT_STATUS[decided.decision] == 0
