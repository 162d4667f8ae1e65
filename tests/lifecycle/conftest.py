"""Fixtures for lifecycle tests: real processes, and proof that none of them outlives its test.

After every test (autouse): no process it started is left (checked by pid, and through the
pytest process being a child subreaper, so orphaned grandchildren come back to it), and no
`/dev/shm` segment with the lifecycle prefix that was not there before is left.
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from multiprocessing import resource_tracker
from pathlib import Path
from typing import Any

import pytest
from omni_errors.security import keys
from omni_errors_tools.chaos.watch import SHM_DIR, alive, children, descendants, kill, shm_entries

# Per pytest process: other sessions on the same machine run pipelines with the default prefix.
SHM_PREFIX = f"omni_lc_t{os.getpid()}_"
SCENARIO = Path(__file__).with_name("scenario.py")
REMOTE_STAGE = Path(__file__).with_name("remote_stage.py")
PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


@dataclass
class Tracker:
    pids: set[int] = field(default_factory=set)

    def track(self, *pids: int) -> None:
        self.pids.update(pids)


@pytest.fixture(scope="session", autouse=True)
def _subreaper() -> None:
    _become_subreaper()


@pytest.fixture(autouse=True)
def processes() -> Iterator[Tracker]:
    """Yields a tracker for pids the test learns about; fails the test on any orphan or shm leak."""
    shm_before = shm_entries(SHM_PREFIX)
    me = os.getpid()
    before = descendants(me)
    tracker = Tracker()
    yield tracker
    deadline = time.monotonic() + 5.0
    leftovers: list[int] = []
    while time.monotonic() < deadline:
        # this process' own resource tracker (started by a SharedMemory here) lives as long as pytest
        kids = descendants(me) - before - {resource_tracker._resource_tracker._pid}
        leftovers = sorted(pid for pid in tracker.pids | kids if alive(pid) and pid != me)
        if not leftovers:
            break
        time.sleep(0.05)
    kill(leftovers)
    for child in children({me}) - before:  # reap zombies reparented to us (subreaper)
        try:
            os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            pass
    leaked = sorted(shm_entries(SHM_PREFIX) - shm_before)
    for name in leaked:
        (SHM_DIR / name).unlink(missing_ok=True)
    assert not leftovers, f"orphan processes left behind: {leftovers}"
    assert not leaked, f"shared memory left behind: {leaked}"


@dataclass
class ScenarioRun:
    proc: subprocess.Popen[str]
    events: dict[str, dict[str, Any]] = field(default_factory=dict)
    stderr: str = ""
    exit_time: float = 0.0

    def wait_event(self, name: str, timeout: float = 180.0) -> dict[str, Any]:
        """Read stdout lines until `name` arrives (or the process ends)."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while name not in self.events and time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            event = json.loads(line)
            self.events[event["event"]] = event
        assert name in self.events, f"no {name!r} event; got {list(self.events)}; stderr:\n{self.finish()[-4000:]}"
        return self.events[name]

    def finish(self, timeout: float = 120.0) -> str:
        try:
            out, err = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, err = self.proc.communicate()
        self.exit_time = self.exit_time or time.time()
        for line in out.splitlines():
            event = json.loads(line)
            self.events[event["event"]] = event
        self.stderr += err
        return self.stderr


@pytest.fixture
def shm_prefix() -> str:
    """The prefix every lifecycle test must give its supervisors (the leak check looks at it)."""
    return SHM_PREFIX


@pytest.fixture
def scenario(processes: Tracker, tmp_path: Path) -> Iterator[Any]:
    """`start(cfg, prefix=())` runs scenario.py (under `prefix`, e.g. `ip netns exec NS`)."""
    runs: list[ScenarioRun] = []

    def start(cfg: dict[str, Any], prefix: Sequence[str] = ()) -> ScenarioRun:
        cfg = {**cfg, "config": {**cfg.get("config", {}), "shm_prefix": SHM_PREFIX}}
        proc = subprocess.Popen(
            [*prefix, sys.executable, str(SCENARIO), json.dumps(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        processes.track(proc.pid)
        run = ScenarioRun(proc)
        runs.append(run)
        return run

    yield start
    for i, run in enumerate(runs):
        if run.proc.poll() is None:
            run.proc.kill()
        run.finish()
        (tmp_path / f"scenario-{i}.err").write_text(run.stderr)  # kept by pytest for post-mortems
        for name in ("started", "startup_failed"):
            if name in run.events:
                processes.track(*run.events[name].get("pids", []))


@dataclass
class StageRun:
    """A remote stage process (tests/lifecycle/remote_stage.py); its stderr goes to `log`."""

    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def stderr(self) -> str:
        return self.log.read_text(errors="replace")

    def wait(self, timeout: float) -> int | None:
        """Its exit code, or None (after killing it) if it outlived `timeout`."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None


@pytest.fixture
def remote_stage(processes: Tracker, tmp_path: Path) -> Iterator[Any]:
    """`start(stage_id, kind, connect, prefix=())` runs a toy engine as a remote stage."""
    runs: list[StageRun] = []

    def start(stage_id: int, kind: str, connect: dict[str, Any], prefix: Sequence[str] = ()) -> StageRun:
        cfg = {"stage_id": stage_id, "kind": kind, "connect": connect}
        log = tmp_path / f"remote-{len(runs)}.err"
        with open(log, "wb") as err:
            proc = subprocess.Popen(
                [*prefix, sys.executable, str(REMOTE_STAGE), json.dumps(cfg)], stdout=subprocess.DEVNULL, stderr=err
            )
        processes.track(proc.pid)
        run = StageRun(proc, log)
        runs.append(run)
        return run

    yield start
    for run in runs:
        if run.proc.poll() is None:
            run.proc.kill()
        run.wait(30)


@pytest.fixture(scope="module")
def keydir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """CURVE key pairs for the remote-link tests: the server, an allowed stage, and a rogue peer."""
    d = tmp_path_factory.mktemp("keys")
    for name in ("server", "stage", "rogue"):
        keys.generate(d, name)
    return d
