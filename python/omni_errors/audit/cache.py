"""The per-file result cache, keyed by content hash.

One JSON file per set of audited roots, under `--cache-dir` (default `$XDG_CACHE_HOME/omni-errors/audit`,
else `~/.cache/omni-errors/audit`). Its version is a hash of the audit's own source, so a changed rule
never reads a stale result. A cache that cannot be read is ignored; one that cannot be written is
reported once on stderr and the audit goes on. Writes are atomic (temporary file, then rename).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any

from omni_errors.audit import atomic
from omni_errors.audit.model import FileResult


def default_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "omni-errors" / "audit"


def code_version() -> str:
    """A hash of the audit package's source: any change to a rule invalidates every entry."""
    h = hashlib.blake2b(digest_size=8)
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    h.update(sys.version.encode())  # `ast` differs between Python versions
    return h.hexdigest()


class ResultCache:
    """Content key -> FileResult for one set of roots."""

    def __init__(self, directory: Path, roots: list[str]) -> None:
        name = hashlib.blake2b("\0".join(sorted(roots)).encode(), digest_size=8).hexdigest()
        self.path = directory / f"{name}.json"
        self.version = code_version()
        self.entries: dict[str, dict[str, Any]] = self._load()
        self.used: dict[str, dict[str, Any]] = {}
        self.changed = False

    def get(self, key: str) -> FileResult | None:
        data = self.entries.get(key)
        if data is None:
            return None
        try:
            result = FileResult.from_json(data)
        except (KeyError, TypeError, ValueError):
            return None
        self.used[key] = data
        return result

    def put(self, key: str, result: FileResult) -> None:
        self.used[key] = result.to_json()
        self.changed = True

    def save(self) -> None:
        """Write the entries this run used (stale ones are dropped), when anything changed."""
        if not self.changed and len(self.used) == len(self.entries):
            return
        payload = json.dumps({"version": self.version, "entries": self.used}, separators=(",", ":"))
        try:
            atomic.write_text(self.path, payload)
        except OSError as exc:
            print(f"omni-errors audit: warning: cache not written to {self.path}: {exc}", file=sys.stderr)

    def _load(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict) or data.get("version") != self.version:
            return {}
        entries = data.get("entries")
        return entries if isinstance(entries, dict) else {}
