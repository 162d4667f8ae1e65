"""What a server started and what it left behind, seen from outside: processes and shared memory.

The chaos harness and the test suites that start real servers and pipelines use this one module.
It reads `/proc` and `/dev/shm` (Linux) directly, so it needs no dependency and imports nothing of
the server it watches.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Iterable
from pathlib import Path

__all__ = [
    "SHM_DIR",
    "ProcessWatcher",
    "alive",
    "children",
    "descendants",
    "free_port",
    "kill",
    "shm_entries",
    "shm_of",
    "unlink_shm",
]

SHM_DIR = Path("/dev/shm")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` now (the kernel's choice for port 0).

    Only for a server that binds a port by number (vLLM's `serve --port`): the port can be taken
    between this call and that bind. One that can inherit a socket gets it bound instead.
    """
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _stat(pid: int | str) -> tuple[str, int] | None:
    """(state, parent pid) from `/proc/PID/stat`, or None when the process is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()  # the command name, in parentheses, may hold spaces
    return fields[0], int(fields[1])


def _parents() -> dict[int, int]:
    """Every process on the machine mapped to its parent, from one pass over `/proc`."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(entry)) is not None:
            parents[int(entry)] = stat[1]
    return parents


def children(pids: Iterable[int]) -> set[int]:
    """The processes whose parent is one of `pids` (zombies included)."""
    wanted = set(pids)
    return {pid for pid, parent in _parents().items() if parent in wanted}


def descendants(*roots: int) -> set[int]:
    """Every process below `roots`: their children, the children's children, and so on."""
    below: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        below.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in below.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Whether `pid` exists and is not a zombie (exited, waiting to be reaped)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def kill(pids: Iterable[int]) -> None:
    """SIGKILL each process that still exists."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def shm_entries(prefix: str = "") -> set[str]:
    """Names of the POSIX shared-memory segments in `/dev/shm` that start with `prefix`."""
    try:
        return {name for name in os.listdir(SHM_DIR) if name.startswith(prefix)}
    except OSError:
        return set()


def unlink_shm(names: Iterable[str]) -> None:
    """Remove these segments from `/dev/shm`; one already gone is skipped."""
    for name in names:
        try:
            (SHM_DIR / name).unlink()
        except FileNotFoundError:
            pass


def shm_of(pids: Iterable[int], names: Iterable[str]) -> list[str]:
    """The names among `names` that carry one of `pids` as a `_`-separated part of their own.

    Segments name their creator's pid (`omni_lc_<pid>_<hex>`): `12` matches `omni_lc_12_ab`, never
    `omni_lc_3125_ab` nor `psm_12ab`.
    """
    wanted = {str(pid) for pid in pids}
    return sorted(name for name in names if wanted & set(name.split("_")))


class ProcessWatcher:
    """Remembers every process seen below `root` while it runs.

    Processes orphaned when their parent dies are re-parented away from `root`; polling while the
    server runs is what lets `orphans()` still name them after `root` has exited.
    """

    def __init__(self, root: int) -> None:
        self.root = root
        self.seen: set[int] = set()

    @property
    def pids(self) -> set[int]:
        """`root` and every descendant seen so far."""
        return {self.root, *self.seen}

    def poll(self) -> None:
        """Add the processes below `root` and below those already seen."""
        self.seen |= descendants(self.root, *self.seen)

    async def watch(self, stop: asyncio.Event, interval: float = 0.2) -> None:
        """Poll every `interval` seconds until `stop` is set."""
        while not stop.is_set():
            self.poll()
            try:
                await asyncio.wait_for(stop.wait(), interval)
            except asyncio.TimeoutError:
                pass

    def orphans(self) -> list[int]:
        """The descendants seen that are still alive."""
        return sorted(pid for pid in self.seen if alive(pid))

    def shm_left(self, before: Iterable[str] = ()) -> list[str]:
        """Segments present now, not in `before`, whose name carries one of the watched pids."""
        return shm_of(self.pids, shm_entries() - set(before))
