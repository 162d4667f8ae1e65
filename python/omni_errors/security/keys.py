"""CURVE key files: made by `omni-errors keys`, read by `serve`, `stage` and the vLLM-Omni plugin.

The files are zmq.auth's (czmq's) certificate format, so `zmq.auth.load_certificate` and the
czmq tools read them: `NAME.key` holds the public key, `NAME.key_secret` both keys. The secret
file is created 0600 in a directory that is not world-writable and is refused later if anyone
but its owner can read it (as ssh does), so a leaked key is a choice, never a default.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

import zmq
import zmq.auth

from omni_errors.errors import OmniErrorsError

__all__ = ["CurveKeys", "KeyFileError", "generate", "load_allowed", "load_directory", "load_public", "load_secret"]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}\Z")
_Z85_KEY = re.compile(rb"[0-9A-Za-z.\-:+=^!/*?&<>()\[\]{}@%$#]{40}\Z")


class KeyFileError(OmniErrorsError, ValueError):
    """A key file is missing, malformed, or readable by others."""


@dataclass(frozen=True, slots=True)
class CurveKeys:
    """A host's CURVE key pair (Z85), the server key it authenticates when it connects, and the
    public keys it lets in when it binds."""

    public: bytes
    secret: bytes
    server: bytes | None = None
    allowed: frozenset[bytes] = frozenset()


def generate(directory: Path, name: str, *, force: bool = False) -> tuple[Path, Path]:
    """Write `directory/NAME.key` (0644) and `directory/NAME.key_secret` (0600); returns both paths.

    Refuses to overwrite existing files unless `force`."""
    if not _NAME.match(name):
        raise KeyFileError(f"key name {name!r} must be 1-64 characters of letters, digits, '_', '.', '-'")
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = directory.stat().st_mode
    if mode & stat.S_IWOTH and not mode & stat.S_ISVTX:
        raise KeyFileError(f"{directory} is writable by everyone: choose a private directory for keys")
    public, secret = directory / f"{name}.key", directory / f"{name}.key_secret"
    existing = [str(p) for p in (public, secret) if p.exists()]
    if existing and not force:
        raise KeyFileError(f"{', '.join(existing)} already exist; pass --force to replace them")
    # pyzmq writes the files with the process umask: write them in a private directory first,
    # fix the modes, then move them into place.
    staging = Path(tempfile.mkdtemp(prefix=".omni-keys-", dir=directory))
    try:
        made_public, made_secret = (Path(p) for p in zmq.auth.create_certificates(staging, name))
        made_secret.chmod(0o600)
        made_public.chmod(0o644)
        os.replace(made_secret, secret)
        os.replace(made_public, public)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return public, secret


def _read(path: Path, what: str) -> tuple[bytes, bytes | None]:
    if not path.is_file():
        raise KeyFileError(f"{what} {path} does not exist (create keys with `omni-errors keys`)")
    try:
        public, secret = zmq.auth.load_certificate(path)
    except (OSError, ValueError) as exc:
        raise KeyFileError(f"{what} {path} is not a key file: {exc}") from None
    for key in (public, secret):
        if key is not None and not _Z85_KEY.match(key):
            raise KeyFileError(f"{what} {path} holds a malformed key (expected 40 Z85 characters)")
    return public, secret


def load_secret(path: Path) -> tuple[bytes, bytes]:
    """(public, secret) Z85 keys from a `.key_secret` file that only its owner can read."""
    public, secret = _read(path, "secret key")
    if secret is None:
        raise KeyFileError(f"{path} holds no secret key: pass the .key_secret file, not the public .key")
    mode = path.stat().st_mode
    if mode & 0o077:
        raise KeyFileError(
            f"secret key {path} is readable by others (mode {stat.S_IMODE(mode):04o}); run `chmod 600 {path}`"
        )
    return public, secret


def load_public(path: Path) -> bytes:
    """The Z85 public key in a `.key` (or `.key_secret`) file."""
    return _read(path, "public key")[0]


def load_allowed(paths: tuple[Path, ...]) -> frozenset[bytes]:
    """Every public key in `paths`: key files, or directories of `*.key` files."""
    keys: set[bytes] = set()
    for path in paths:
        files = sorted(path.glob("*.key")) if path.is_dir() else [path]
        if path.is_dir() and not files:
            raise KeyFileError(f"allowed-keys directory {path} holds no *.key files")
        keys.update(load_public(f) for f in files)
    if not keys:
        raise KeyFileError("no allowed stage keys: pass at least one public key file or directory")
    return frozenset(keys)


def load_directory(directory: Path, server: str, *, setting: str) -> CurveKeys:
    """Every key of one host from one directory: exactly one `*.key_secret` (this host's), the
    server's `SERVER.key`, and every `*.key` as the keys allowed in. `setting` names what pointed
    here, for the errors."""
    if not directory.is_dir():
        raise KeyFileError(f"{setting}={directory} is not a directory")
    secrets = sorted(directory.glob("*.key_secret"))
    if len(secrets) != 1:
        found = ", ".join(p.name for p in secrets) or "none"
        raise KeyFileError(f"{setting}={directory} must hold exactly one secret key, this host's (found: {found})")
    public, secret = load_secret(secrets[0])
    return CurveKeys(public, secret, load_public(directory / f"{server}.key"), load_allowed((directory,)))
