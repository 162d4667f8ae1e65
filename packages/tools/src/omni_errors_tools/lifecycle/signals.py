"""SIGINT/SIGTERM handling that only records the request and wakes the loop.

Handlers never raise or clean up themselves (seed 001: a handler that does work inside a stuck
loop is how Ctrl+C stops working). The one exception is a second SIGINT, which forces exit: in a
worker it raises KeyboardInterrupt where the loop is stuck; in the API process
`Supervisor.handle_signal` kills its stages at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Callable
from types import FrameType

__all__ = ["AsyncSignalHandlers", "SignalLatch"]

_HANDLED = (signal.SIGINT, signal.SIGTERM)


class SignalLatch:
    """Worker side: remembers the first SIGINT/SIGTERM and writes a byte to a self-pipe.

    The worker waits on `wake_fd` together with its request channel, so a signal ends any wait
    at once. A second SIGINT raises KeyboardInterrupt wherever the main thread is.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._previous: dict[int, object] = {}

    @property
    def wake_fd(self) -> int:
        return self._r

    def install(self) -> None:
        for sig in _HANDLED:
            self._previous[sig] = signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt("second SIGINT: forced exit")
        if self.signum is None:
            self.signum = signum
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._w, b"\0")

    def drain(self) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            while os.read(self._r, 64):
                pass

    def close(self) -> None:
        for sig, handler in self._previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(sig, handler)  # type: ignore[arg-type]
        self._previous.clear()
        for fd in (self._r, self._w):
            with contextlib.suppress(OSError):
                os.close(fd)


class AsyncSignalHandlers:
    """API side: asyncio signal handlers that pass every SIGINT/SIGTERM to `on_signal(signum)`.

    The receiver (`Supervisor.handle_signal`) tells a first signal from a second one, so that a
    signal caught elsewhere (uvicorn's handlers) counts the same. Install only from the thread
    that runs the loop, and only in the main thread (a Python rule).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, on_signal: Callable[[int], None]) -> None:
        self._loop = loop
        self._on_signal = on_signal

    def install(self) -> None:
        for sig in _HANDLED:
            self._loop.add_signal_handler(sig, self._on_signal, sig)

    def remove(self) -> None:
        for sig in _HANDLED:
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_signal_handler(sig)
