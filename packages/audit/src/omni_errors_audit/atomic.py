"""Atomic file replacement for the cache and the baseline: readers never see half a file."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def write_text(path: Path, text: str) -> None:
    """Write `text` to a new file beside `path`, then rename it over `path`.

    The temporary file is opened with `open(..., "x")`, so it gets the usual permissions (the umask),
    not the owner-only ones of `tempfile.mkstemp`: a baseline is committed and read by everyone.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        with open(tmp, "x", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
