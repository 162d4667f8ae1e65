"""Two network namespaces joined by a veth pair: a "server host" and a "stage host" for tests.

The ends get link-local addresses (169.254.11.1/30 and .2/30) that exist only inside the two
namespaces: neither has a default route or any other interface but its loopback, so no test
packet can leave them. `NetPair.destroy` kills what still runs inside and deletes both
namespaces (the veth pair goes with them); a namespace left by a killed test session is found by
the pid in its name and removed by the next session. Needs root (CI runs as root).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psutil

__all__ = ["NetPair", "NetnsSetupError", "call_in"]

PREFIX = "omni-t"
CLONE_NEWNET = 0x40000000
T = TypeVar("T")


class NetnsSetupError(RuntimeError):
    """Creating the namespaces failed (root is present, so this fails the tests, never skips them)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], check=check, capture_output=True, text=True, timeout=30)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _netns_names() -> list[str]:
    out = _ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def remove_stale() -> None:
    """Delete namespaces left by test sessions that no longer run (their pid is in the name)."""
    for name in _netns_names():
        if not name.startswith(PREFIX):
            continue
        owner = name[len(PREFIX) :].split("-")[0]
        if owner.isdigit() and not _alive(int(owner)):
            _kill_inside(name)
            _ip("netns", "del", name, check=False)


def _pids(ns: str) -> list[int]:
    return [int(p) for p in _ip("netns", "pids", ns, check=False).stdout.split()]


def _kill_inside(ns: str) -> list[int]:
    pids = [pid for pid in _pids(ns) if _alive(pid)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids


def call_in(ns: str, fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a thread that has entered namespace `ns`: the sockets it (and the threads it
    starts) opens live there. A namespace is per thread on Linux, so this process stays put."""
    out: dict[str, Any] = {}

    def run() -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        fd = os.open(f"/run/netns/{ns}", os.O_RDONLY)
        try:
            if libc.setns(fd, CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), f"setns into {ns}")
            out["value"] = fn(*args)
        except BaseException as exc:
            out["error"] = exc
        finally:
            os.close(fd)

    thread = threading.Thread(target=run, name=f"in-{ns}")
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    result: T = out["value"]
    return result


@dataclass
class NetPair:
    """`a` is the server host, `b` the stage host."""

    a: str
    b: str
    veth_a: str
    veth_b: str
    addr_a: str = "169.254.11.1"
    addr_b: str = "169.254.11.2"
    nft_tables: set[str] = field(default_factory=set)

    @classmethod
    def create(cls, tag: str) -> NetPair:
        pid = os.getpid()
        pair = cls(f"{PREFIX}{pid}-{tag}a", f"{PREFIX}{pid}-{tag}b", f"oe{pid % 10**7}{tag}a", f"oe{pid % 10**7}{tag}b")
        try:
            _ip("netns", "add", pair.a)
            _ip("netns", "add", pair.b)
            _ip("link", "add", pair.veth_a, "type", "veth", "peer", "name", pair.veth_b)
            _ip("link", "set", pair.veth_a, "netns", pair.a)
            _ip("link", "set", pair.veth_b, "netns", pair.b)
            for ns, dev, addr in ((pair.a, pair.veth_a, pair.addr_a), (pair.b, pair.veth_b, pair.addr_b)):
                _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "link", "set", dev, "up")
        except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired) as exc:
            detail = getattr(exc, "stderr", "") or exc
            pair.destroy()
            raise NetnsSetupError(f"could not create the test namespaces: {detail}") from exc
        return pair

    def exec(self, ns: str, *argv: str) -> list[str]:
        """The command line that runs `argv` inside namespace `ns`."""
        return ["ip", "netns", "exec", ns, *argv]

    def run(self, ns: str, *argv: str) -> str:
        return subprocess.run(self.exec(ns, *argv), check=True, capture_output=True, text=True, timeout=30).stdout

    def pids(self) -> list[int]:
        return [int(p) for ns in (self.a, self.b) for p in _ip("netns", "pids", ns, check=False).stdout.split()]

    # -- faults ------------------------------------------------------------------------------

    def set_link(self, up: bool) -> None:
        """`ip link set down` on the stage host's end: the carrier goes on both sides."""
        _ip("-n", self.b, "link", "set", self.veth_b, "up" if up else "down")

    def drop(self, ns: str, percent: int) -> None:
        """An nftables rule in `ns` dropping `percent` % of the packets it receives (100: a partition)."""
        self._chain(ns)
        rule = ["drop"] if percent >= 100 else ["numgen", "random", "mod", "100", "<", str(percent), "drop"]
        self.run(ns, "nft", "add", "rule", "inet", "omni_test", "input", "iifname", self._dev(ns), *rule)

    def _chain(self, ns: str) -> None:
        """The test's own nftables table and input chain in `ns` (removed by `undrop`, or with the namespace)."""
        self.run(ns, "nft", "add", "table", "inet", "omni_test")
        self.nft_tables.add(ns)
        self.run(ns, "nft", "add", "chain", "inet", "omni_test", "input", "{ type filter hook input priority 0; }")

    def reset_once(self, ns: str) -> None:
        """An nftables rule in `ns` answering the next TCP data packet it receives with a reset
        (one packet: the token bucket holds one, refilled once a minute); `resets` counts it."""
        self._chain(ns)
        self.run(ns, "nft", "add", "rule", "inet", "omni_test", "input", "iifname", self._dev(ns), "tcp", "flags",
                 "&", "psh", "==", "psh", "limit", "rate", "1/minute", "burst", "1", "packets", "counter",
                 "reject", "with", "tcp", "reset")  # fmt: skip

    def resets(self, ns: str) -> int:
        """Packets the `reset_once` rule in `ns` has answered with a reset."""
        listing = self.run(ns, "nft", "list", "chain", "inet", "omni_test", "input")
        return sum(int(line.split("counter packets ")[1].split()[0]) for line in listing.splitlines()
                   if "reject" in line and "counter packets " in line)  # fmt: skip

    def undrop(self, ns: str) -> None:
        if ns in self.nft_tables:
            self.run(ns, "nft", "delete", "table", "inet", "omni_test")
            self.nft_tables.discard(ns)

    def rate_limit(self, ns: str, rate: str, burst: str = "16kb", latency: str = "500ms") -> None:
        """A `tc tbf` rate limit on the egress of `ns`'s veth end (this kernel has no netem)."""
        self.run(ns, "tc", "qdisc", "replace", "dev", self._dev(ns), "root", "tbf", "rate", rate, "burst", burst,
                 "latency", latency)  # fmt: skip

    def clear_rate_limit(self, ns: str) -> None:
        subprocess.run(
            self.exec(ns, "tc", "qdisc", "del", "dev", self._dev(ns), "root"), capture_output=True, timeout=30
        )

    def _dev(self, ns: str) -> str:
        return self.veth_a if ns == self.a else self.veth_b

    def destroy(self, grace: float = 10.0) -> list[int]:
        """Kill what runs inside, delete both namespaces; returns the pids that had to be killed.

        A process whose parent has just exited (a stage, multiprocessing's resource tracker) may
        still be ending: it gets `grace` seconds to go by itself before it counts as left behind."""
        killed: list[int] = []
        ours = [ns for ns in (self.a, self.b) if ns in _netns_names()]
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(pid) for ns in ours for pid in _pids(ns)):
            time.sleep(0.1)
        for ns in ours:
            killed += _kill_inside(ns)
        deadline = time.monotonic() + 5
        while killed and any(_alive(p) for p in killed) and time.monotonic() < deadline:
            time.sleep(0.02)
        for ns in ours:
            _ip("netns", "del", ns, check=False)
        with contextlib.suppress(subprocess.CalledProcessError):  # created before the move, then a failure
            _ip("link", "del", self.veth_a, check=False)
        return killed
