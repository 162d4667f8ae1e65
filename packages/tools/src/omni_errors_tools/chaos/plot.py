"""`chaos --plot FILE.png`: requests answered over time, one panel per scenario, the fault marked.

Uses matplotlib when it is installed (`pip install matplotlib`); otherwise writes a plain PNG with
the same curves and markers but no text, using only zlib (so `--plot` never needs a dependency).
"""

from __future__ import annotations

import struct
import sys
import zlib

from omni_errors_tools.chaos.report import ScenarioResult

__all__ = ["plot"]


def _series(r: ScenarioResult) -> tuple[list[float], list[int]]:
    times = sorted(r.timeline)
    return [0.0, *times], [0, *range(1, len(times) + 1)]


def plot(results: list[ScenarioResult], path: str) -> None:
    shown = [r for r in results if r.timeline]
    if not shown:
        sys.stderr.write("--plot: no scenario sent requests; nothing to draw\n")
        return
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        _plain_png(shown, path)
        sys.stderr.write(f"--plot: matplotlib is not installed; wrote {path} without labels\n")
        return
    fig, axes = plt.subplots(len(shown), 1, figsize=(8, 2.4 * len(shown)), squeeze=False)
    for ax, r in zip(axes[:, 0], shown, strict=True):
        xs, ys = _series(r)
        ax.step(xs, ys, where="post", color="tab:blue", label="answered")
        ax.axhline(r.requests, color="grey", lw=0.5, ls=":")
        if r.t_fault is not None:
            ax.axvline(r.t_fault, color="tab:red", ls="--", label=f"fault at {r.t_fault:.2f}s")
        if r.t_exit is not None:
            ax.axvline((r.t_fault or 0.0) + r.t_exit, color="black", ls="-.", label=f"exit {r.exit_code}")
        ax.set_title(f"{r.name}: {r.title}", fontsize=9)
        ax.set_xlabel("seconds since the load started", fontsize=8)
        ax.set_ylabel("answered", fontsize=8)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _plain_png(results: list[ScenarioResult], path: str, width: int = 800, panel: int = 200) -> None:
    height = panel * len(results)
    px = bytearray(b"\xff" * (width * height * 3))

    def dot(x: int, y: int, rgb: tuple[int, int, int]) -> None:
        if 0 <= x < width and 0 <= y < height:
            i = (y * width + x) * 3
            px[i : i + 3] = bytes(rgb)

    for k, r in enumerate(results):
        xs, ys = _series(r)
        top, span = k * panel + 10, panel - 30
        t_max = max(xs[-1], (r.t_fault or 0) + (r.t_exit or 0), 1e-3) * 1.05
        n_max = max(r.requests, 1)

        def to_x(t: float, m: float = t_max) -> int:
            return 40 + int((width - 60) * t / m)

        def to_y(n: int, b: int = top + span, h: int = span, m: int = n_max) -> int:
            return b - int(h * n / m)

        for x in range(40, width - 20):
            dot(x, top + span, (0, 0, 0))
        for y in range(top, top + span):
            dot(40, y, (0, 0, 0))
        for (t0, n0), (t1, _) in zip(zip(xs, ys, strict=True), zip(xs[1:], ys[1:], strict=True), strict=False):
            for x in range(to_x(t0), to_x(t1) + 1):
                dot(x, to_y(n0), (31, 119, 180))
            for y in range(to_y(n0 + 1), to_y(n0) + 1):
                dot(to_x(t1), y, (31, 119, 180))
        for t, rgb in (
            (r.t_fault, (214, 39, 40)),
            (None if r.t_exit is None else (r.t_fault or 0) + r.t_exit, (0, 0, 0)),
        ):
            if t is not None:
                for y in range(top, top + span, 2):
                    dot(to_x(t), y, rgb)
    raw = b"".join(b"\x00" + bytes(px[y * width * 3 : (y + 1) * width * 3]) for y in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data))

    png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
    png += chunk(b"IDAT", zlib.compress(raw, 6)) + chunk(b"IEND", b"")
    with open(path, "wb") as f:
        f.write(png)
