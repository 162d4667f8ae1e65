"""`omni-errors doctor` on the installed vLLM-Omni: the decision, every target, and its exit status."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from omni_errors_vllm_omni.manifest import TARGETS, Process

DOCTOR = [sys.executable, "-m", "omni_errors_cli", "doctor"]


def _doctor(tmp_path: Path, *args: str, **env: str) -> tuple[int, str]:
    done = subprocess.run(
        [*DOCTOR, *args],
        env={**os.environ, "OMNI_ERRORS_CACHE_DIR": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, done.stdout


def test_json_says_enabled_with_every_target_matching(tmp_path: Path) -> None:
    code, out = _doctor(tmp_path, "--json", OMNI_ERRORS_VLLM_OMNI="1")
    report: dict[str, Any] = json.loads(out)
    assert code == 0
    assert report["decision"] == "enabled"
    assert report["versions"]["vllm-omni"] == "0.30.0" and report["versions"]["vllm"].startswith("0.30.")
    assert [t["target"] for t in report["targets"]] == [t.key for t in TARGETS]
    assert [(t["process"], t["hop"]) for t in report["targets"]] == [(t.process.value, t.hop.value) for t in TARGETS]
    assert {t["state"] for t in report["targets"]} == {"matches"}
    assert [c["code"] for c in report["fatal_exit_codes"]] == [82, 81, 80, 84, 86, 85]  # by precedence
    assert report["stages"] == {"step_deadline_s": 120.0, "deadline_setting": "OMNI_ERRORS_STEP_DEADLINE_S"}
    assert report["multi_node"]["sockets"] == {"curve": False, "keys": None, "error": None}
    assert report["multi_node"]["rejoin_window_s"] == 120.0


def test_the_text_report_names_every_target_under_its_process_and_module_within_100_columns(
    tmp_path: Path,
) -> None:
    code, out = _doctor(tmp_path, OMNI_ERRORS_VLLM_OMNI="1")
    assert code == 0
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 100
    start = lines.index(next(line for line in lines if line.startswith("  target ")))
    listed: dict[tuple[str, str], list[str]] = {}
    process = module = ""
    for line in lines[start + 1 : lines.index("", start)]:
        indent = len(line) - len(line.lstrip())
        if indent == 2:
            process = line.strip()
        elif indent == 4:
            module = line.strip()
            assert (process, module) not in listed, f"{module} twice under {process}"
            listed[(process, module)] = []
        elif indent == 6:  # a name, or the columns of a name too long for its own line
            listed[(process, module)].append(line.split()[0])
    processes = list(dict.fromkeys(p for p, _ in listed))
    assert processes == [p.value for p in Process if any(t.process is p for t in TARGETS)]  # in Process order
    for target in TARGETS:
        assert target.qualname in listed[(target.process.value, target.module)], target.key


def test_the_text_report_and_the_exit_status_of_a_disabled_plugin(tmp_path: Path) -> None:
    code, out = _doctor(tmp_path, OMNI_ERRORS_VLLM_OMNI="0")
    assert code == 4
    assert "plugin       disabled: OMNI_ERRORS_VLLM_OMNI=0" in out
    assert "vLLM-Omni's own" in out


def test_a_plugin_vllm_would_not_load_is_reported_disabled(tmp_path: Path) -> None:
    code, out = _doctor(tmp_path, "--json", OMNI_ERRORS_VLLM_OMNI="1", VLLM_PLUGINS="something_else")
    assert code == 4
    assert json.loads(out)["reason"] == "VLLM_PLUGINS=something_else does not list omni_errors"


def test_the_multi_node_settings_are_checked(tmp_path: Path) -> None:
    from omni_errors.security import keys

    directory = tmp_path / "keys"
    keys.generate(directory, "head")
    code, out = _doctor(
        tmp_path, "--json", OMNI_ERRORS_VLLM_OMNI="1", OMNI_ERRORS_VLLM_OMNI_KEYS=str(directory),
        OMNI_ERRORS_REJOIN_WINDOW_S="30", OMNI_ERRORS_STEP_DEADLINE_S="45",
    )  # fmt: skip
    report = json.loads(out)
    assert code == 0
    assert report["stages"]["step_deadline_s"] == 45.0
    assert report["multi_node"]["rejoin_window_s"] == 30.0
    assert report["multi_node"]["sockets"]["curve"] and report["multi_node"]["sockets"]["allowed_keys"] == 1
    keys.generate(directory, "stage0")  # a second secret: whose key would this host use?
    code, out = _doctor(tmp_path, OMNI_ERRORS_VLLM_OMNI="1", OMNI_ERRORS_VLLM_OMNI_KEYS=str(directory))
    assert code == 6
    assert "CURVE keys unusable" in out and "exactly one secret key" in out
