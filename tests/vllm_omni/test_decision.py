"""The decision `register()` makes in every process (`decide`), one test per outcome: what the
installed sources say, target by target, decides it; a process never half applies the plugin.

The checks are given (each target's state as `verify.check` would report it), so each outcome is
reached on this one installed vLLM-Omni; the real checks on the release and on every prefix of the
series: test_manifest.py and test_upstream_series.py.
"""

from __future__ import annotations

from collections.abc import Callable

import omni_errors_vllm_omni as plugin
import pytest
from omni_errors_vllm_omni.doctor import EXIT_STATUS
from omni_errors_vllm_omni.manifest import TARGETS
from omni_errors_vllm_omni.verify import Check, State


def _checks(state_of: Callable[[int], State]) -> list[Check]:
    return [Check(t, state_of(i), "0" * 16, "why") for i, t in enumerate(TARGETS)]


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> Callable[[Callable[[int], State]], None]:
    """vLLM-Omni 0.30.0 installed, the plugin switched on, and each target's state given."""
    monkeypatch.setenv(plugin.ENV_VAR, "1")
    monkeypatch.setattr(plugin, "installed", lambda: (True, "0.30.0"))

    def given(state_of: Callable[[int], State]) -> None:
        monkeypatch.setattr(plugin, "check", lambda: _checks(state_of))

    return given


def test_every_target_matching_is_enabled(installed: Callable[[Callable[[int], State]], None]) -> None:
    installed(lambda i: State.MATCHES)
    decided = plugin.decide()
    assert (decided.decision, decided.vllm_omni) == (plugin.Decision.ENABLED, "0.30.0")
    assert decided.reason == f"all {len(TARGETS)} targets match the installed sources"
    assert EXIT_STATUS[decided.decision] == 0


def test_some_targets_upstreamed_is_enabled_for_the_rest(installed: Callable[[Callable[[int], State]], None]) -> None:
    installed(lambda i: State.UPSTREAMED if i < 3 else State.MATCHES)
    decided = plugin.decide()
    assert decided.decision is plugin.Decision.ENABLED
    assert decided.reason == (
        f"{len(TARGETS) - 3} targets match the installed sources, 3 are upstreamed (nothing patched there)"
    )


def test_one_target_that_differs_refuses_the_whole_plugin(installed: Callable[[Callable[[int], State]], None]) -> None:
    installed(lambda i: State.DIFFERS if i in (4, 9) else State.MATCHES)
    decided = plugin.decide()
    assert decided.decision is plugin.Decision.REFUSED
    assert decided.reason == f"{TARGETS[4].key} differs: why (and 1 more)"
    assert EXIT_STATUS[decided.decision] == 3


def test_a_missing_target_refuses_it_too(installed: Callable[[Callable[[int], State]], None]) -> None:
    installed(lambda i: State.MISSING if i == 0 else State.UPSTREAMED)
    decided = plugin.decide()
    assert (decided.decision, decided.reason) == (plugin.Decision.REFUSED, f"{TARGETS[0].key} missing: why")


def test_without_vllm_omni_there_is_nothing_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(plugin.ENV_VAR, "1")
    monkeypatch.setattr(plugin, "installed", lambda: (False, None))
    monkeypatch.setattr(plugin, "check", lambda: pytest.fail("nothing is checked without vLLM-Omni"))
    decided = plugin.decide()
    assert (decided.decision, decided.reason) == (plugin.Decision.ABSENT, "vllm-omni is not installed")
    assert EXIT_STATUS[decided.decision] == 5


@pytest.mark.parametrize("value", ["0", "false", "off", "no"])
def test_the_switch_disables_it_before_anything_is_read(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(plugin.ENV_VAR, value)
    monkeypatch.setattr(plugin, "installed", lambda: pytest.fail("nothing is read while disabled"))
    decided = plugin.decide()
    assert (decided.decision, decided.reason) == (plugin.Decision.DISABLED, f"{plugin.ENV_VAR}={value}")
    assert EXIT_STATUS[decided.decision] == 4
