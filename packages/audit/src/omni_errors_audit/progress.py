"""A one-line progress bar on stderr, drawn only when stderr is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """`auditing  812/1609 files [##########..........]`, redrawn at most 20 times a second."""

    def __init__(self, total: int, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = (self.stream.isatty() if enabled is None else enabled) and total > 0
        self.total = total
        self.done = 0
        self._last = 0.0

    def advance(self, count: int) -> None:
        self.done += count
        now = time.monotonic()
        if self.enabled and (now - self._last >= 0.05 or self.done >= self.total):
            self._last = now
            width = 30
            filled = width * self.done // self.total
            bar = "#" * filled + "." * (width - filled)
            self.stream.write(f"\rauditing {self.done:>{len(str(self.total))}}/{self.total} files [{bar}]")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")  # clear the line: the report follows
            self.stream.flush()
