"""A TCP relay that delays, holds or cuts what passes through it: a bad network on one host.

This kernel has no netem, so latency comes from here: every chunk read on one side is written to
the other `delay` seconds later, in order. `hold()` stops forwarding while keeping both
connections open (a partition as TCP sees it: nothing arrives, nothing is reset), `release()`
resumes, and `cut()` resets every connection. The chaos harness runs it between a remote stage
and its server; `python -m omni_errors_tools.chaos.relay LISTEN TARGET --delay S` runs it alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import struct
import sys
from collections.abc import Sequence

__all__ = ["Relay", "main"]

_CHUNK = 65536
_QUEUE = 256  # chunks in flight per direction: the relay's memory stays bounded


class Relay:
    def __init__(self, listen: tuple[str, int], target: tuple[str, int], *, delay: float = 0.0) -> None:
        self.listen, self.target, self.delay = listen, target, delay
        self._server: asyncio.base_events.Server | None = None
        self._open = asyncio.Event()
        self._open.set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.forwarded = {"up": 0, "down": 0}  # bytes delivered towards the target / back

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, *self.listen)
        if (self.listen[0], self.port) == self.target:  # it would forward to itself until out of fds
            await self.close()
            raise OSError(f"relay on port {self.port} would forward to itself")

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def hold(self) -> None:
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def cut(self) -> None:
        """Reset every connection (SO_LINGER 0: the peers get RST, queued data is lost)."""
        for writer in list(self._writers):
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        self.cut()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        self._writers |= {writer, up_writer}
        pumps = [self._pump(reader, up_writer, "up"), self._pump(up_reader, writer, "down")]
        for pump in pumps:
            task = asyncio.ensure_future(pump)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, direction: str) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue(_QUEUE)

        async def deliver() -> None:
            while True:
                due, data = await queue.get()  # omni-errors: ignore[OE303]: the pump queues b"" last
                if not data:
                    writer.close()
                    return
                await asyncio.sleep(max(0.0, due - loop.time()))
                await self._open.wait()  # omni-errors: ignore[OE303]: a held link is the fault; close() ends it
                writer.write(data)
                self.forwarded[direction] += len(data)
                await writer.drain()

        sender = asyncio.ensure_future(deliver())
        try:
            while True:
                await self._open.wait()  # omni-errors: ignore[OE303]: a held link is the fault; close() ends it
                data = await reader.read(_CHUNK)
                await queue.put((loop.time() + self.delay, data))
                if not data:
                    break
            await sender
        except (OSError, asyncio.CancelledError):
            sender.cancel()
        finally:
            self._writers.discard(writer)


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m omni_errors_tools.chaos.relay", description=__doc__)
    p.add_argument("listen", type=_address, metavar="HOST:PORT")
    p.add_argument("target", type=_address, metavar="HOST:PORT")
    p.add_argument("--delay", type=float, default=0.0, help="seconds added to every chunk, each direction")
    args = p.parse_args(argv)

    async def run() -> None:
        relay = Relay(args.listen, args.target, delay=args.delay)
        await relay.start()
        print(f"relaying {args.listen} -> {args.target} (+{args.delay:g}s)", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        await stop.wait()  # omni-errors: ignore[OE303]: the relay runs until a signal
        await relay.close()

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
