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

from omni_errors_audit import atomic
from omni_errors_audit.model import FileResult


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
    """Content key -> FileResult for one set of roots, plus the outcome of the last run.

    The last run's sites are kept beside the per-file entries, under a key made of every file's path
    and content key: when nothing changed, a rerun reads that one record and does no other work.
    """

    def __init__(self, directory: Path, roots: list[str]) -> None:
        name = hashlib.blake2b("\0".join(sorted(roots)).encode(), digest_size=8).hexdigest()
        self.path = directory / f"{name}.json"
        self.run_path = directory / f"{name}.run.json"
        self.version = code_version()
        self._entries: dict[str, dict[str, Any]] | None = None
        self.used: dict[str, dict[str, Any]] = {}
        self.changed = False

    @property
    def entries(self) -> dict[str, dict[str, Any]]:
        if self._entries is None:
            data = self._read(self.path)
            entries = data.get("entries") if data else None
            self._entries = entries if isinstance(entries, dict) else {}
        return self._entries

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
        if self.changed or len(self.used) != len(self.entries):
            self._write(self.path, {"version": self.version, "entries": self.used})

    def last_run(self, run_key: str) -> dict[str, Any] | None:
        """The outcome recorded by `save_run(run_key, ...)`, if it is the last run's and still valid."""
        data = self._read(self.run_path)
        if data is None or data.get("run") != run_key or not isinstance(data.get("outcome"), dict):
            return None
        outcome: dict[str, Any] = data["outcome"]
        return outcome

    def save_run(self, run_key: str, outcome: dict[str, Any]) -> None:
        self._write(self.run_path, {"version": self.version, "run": run_key, "outcome": outcome})

    def _read(self, path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("version") == self.version else None

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        try:
            atomic.write_text(path, json.dumps(data, separators=(",", ":")))
        except OSError as exc:
            print(f"omni-errors audit: warning: cache not written to {path}: {exc}", file=sys.stderr)
