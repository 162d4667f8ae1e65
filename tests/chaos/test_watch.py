"""The process/shm watcher on real processes and a real shared-memory segment (no server)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from multiprocessing import shared_memory

from omni_errors_tools.chaos.watch import (
    ProcessWatcher,
    alive,
    children,
    descendants,
    free_port,
    kill,
    shm_entries,
    shm_of,
    unlink_shm,
)

# A parent that starts a grandchild, prints its pid, then exits: the grandchild is orphaned.
ORPHANING = (
    "import subprocess, sys; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
    "print(p.pid, flush=True); sys.stdin.read()"
)


def test_descendants_orphans_and_kill() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHANING], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert parent.stdout is not None and parent.stdin is not None
    grandchild = int(parent.stdout.readline())
    try:
        watcher = ProcessWatcher(parent.pid)
        watcher.poll()
        assert grandchild in watcher.seen and grandchild in descendants(os.getpid())
        assert parent.pid in children({os.getpid()})
        parent.stdin.close()  # the parent exits; its child lives on, re-parented away from us
        parent.wait(30)
        assert watcher.orphans() == [grandchild]
    finally:
        kill([grandchild])
        parent.stdout.close()
        if not parent.stdin.closed:
            parent.stdin.close()
        parent.wait(30)
    deadline = time.monotonic() + 30
    while alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(grandchild)
    assert watcher.orphans() == []


def test_watch_polls_until_stopped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        watcher = ProcessWatcher(os.getpid())

        async def run() -> None:
            stop = asyncio.Event()
            task = asyncio.create_task(watcher.watch(stop, interval=0.01))
            await asyncio.sleep(0.05)
            stop.set()
            await asyncio.wait_for(task, 5)

        asyncio.run(run())
        assert child.pid in watcher.seen
    finally:
        child.kill()
        child.wait()
    assert not alive(child.pid)


def test_shm_names_by_pid_token() -> None:
    names = ["omni_lc_12_ab", "omni_lc_3125_cd", "psm_12ab", "omni_pipe_7_12"]
    assert shm_of([12], names) == ["omni_lc_12_ab", "omni_pipe_7_12"]
    assert shm_of([312], names) == []


def test_shm_left_and_free_port() -> None:
    before = shm_entries()
    shm = shared_memory.SharedMemory(name=f"omni_watch_{os.getpid()}_t", create=True, size=16)
    try:
        assert shm.name in shm_entries("omni_watch_")
        assert ProcessWatcher(os.getpid()).shm_left(before) == [shm.name]
    finally:
        shm.close()
        shm.unlink()
    assert ProcessWatcher(os.getpid()).shm_left(before) == []
    assert 0 < free_port() < 65536


def test_unlink_shm_removes_what_a_killed_server_left() -> None:
    shm = shared_memory.SharedMemory(name=f"omni_watch_{os.getpid()}_left", create=True, size=16)
    shm.close()
    try:
        unlink_shm([shm.name, f"omni_watch_{os.getpid()}_gone"])  # the second one never existed
        assert shm_entries(shm.name) == set()
    finally:
        unlink_shm([shm.name])
