"""What a link is: its endpoint, its keys, its deadlines and its bounds (no pyzmq needed here).

CURVE is the default; `curve_keys()` reads the key files a configuration names. Plaintext needs
`plaintext=True` *and* a loopback endpoint: frames that leave the host are always encrypted and
authenticated. docs/remote.md explains every default.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from omni_errors.errors import OmniErrorsError

if TYPE_CHECKING:
    from omni_errors.security.keys import CurveKeys

__all__ = ["LinkConfig", "LinkConfigError", "StageConnectConfig", "endpoint_host", "require_loopback"]


class LinkConfigError(OmniErrorsError, ValueError):
    """A link cannot be set up as asked (bad endpoint, plaintext off loopback, missing keys)."""


def endpoint_host(endpoint: str) -> tuple[str, int]:
    """`tcp://HOST:PORT` -> (host, port); IPv6 hosts in brackets (`tcp://[fe80::1%veth0]:5570`)."""
    scheme, sep, rest = endpoint.partition("://")
    if scheme != "tcp" or not sep:
        raise LinkConfigError(f"link endpoint {endpoint!r} must look like tcp://HOST:PORT")
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise LinkConfigError(f"link endpoint {endpoint!r} needs a port 1..65535 (tcp://HOST:PORT)")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not host or host == "*":
        raise LinkConfigError(f"link endpoint {endpoint!r} needs an explicit address, not a wildcard")
    return host, int(port)


def require_loopback(endpoint: str, flag: str) -> None:
    """Plaintext is allowed on loopback only: raise LinkConfigError for any other address."""
    from omni_errors.security.curve import is_loopback

    host, _ = endpoint_host(endpoint)
    if not is_loopback(host):
        raise LinkConfigError(
            f"{flag} is only allowed on a loopback address (127.0.0.0/8 or ::1), not {host!r}: frames that "
            "leave this host are encrypted; create keys with `omni-errors keys` and drop the flag"
        )


@contextlib.contextmanager
def _key_errors() -> Iterator[None]:
    """A key file that cannot be used is a link that cannot be set up as asked (its message kept)."""
    from omni_errors.security.keys import KeyFileError

    try:
        yield
    except KeyFileError as exc:
        raise LinkConfigError(str(exc)) from exc


def _check_deadlines(heartbeat_interval: float, timeout: float) -> None:
    if heartbeat_interval <= 0 or timeout <= 0:
        raise LinkConfigError(f"link heartbeat {heartbeat_interval}s and timeout {timeout}s must be > 0")
    if timeout < 3 * heartbeat_interval:
        raise LinkConfigError(
            f"link timeout {timeout}s must be at least 3 heartbeat intervals ({3 * heartbeat_interval:g}s): "
            "one late heartbeat must not end a session"
        )


def _check_bounds(hwm: int, max_message: int) -> None:
    # libzmq stalls a pipe whose high-water mark is below a handful of messages (its low-water
    # mark rounds to zero), so a tiny HWM would hang the link instead of bounding it.
    if hwm < 16 or max_message < 4096:
        raise LinkConfigError(f"link hwm {hwm} must be >= 16 messages and max_message {max_message} >= 4096 bytes")


@dataclass(frozen=True)
class LinkConfig:
    """The supervisor's side: where it listens, its CURVE secret key, the stages' allowed keys.

    `allow` lists public key files, or directories whose `*.key` files are read (zmq.auth's layout).
    """

    endpoint: str
    secret_key: Path | None = None
    allow: tuple[Path, ...] = ()
    plaintext: bool = False
    heartbeat_interval: float = 0.25  # both ways
    timeout: float = 1.5  # a READY stage silent this long is gone (detected <= timeout + watchdog interval)
    join_timeout: float = 60.0  # ... before READY: imports and compiles may hold the GIL for seconds
    stage_timeout: float = 15.0  # a stage that hears nothing from us this long ends itself (exit 83);
    # long, because the API process's loop can stall for seconds (an import holding the GIL) and a
    # stage that leaves a live server kills its pipeline; ending an orphaned stage is not urgent
    hwm: int = 1000  # messages queued per peer and direction (ZMQ high-water mark); then 503
    max_message: int = 16 << 20  # a larger message drops the connection (libzmq's ZMQ_MAXMSGSIZE)
    linger: float = 1.0  # on close, how long queued messages may still go out
    # A listening TCP socket already bound to `endpoint`, inherited from the parent (libzmq's
    # ZMQ_USE_FD): a launcher binds first and passes the socket on, never a port to bind later.
    listen_fd: int | None = None

    def __post_init__(self) -> None:
        endpoint_host(self.endpoint)
        _check_deadlines(self.heartbeat_interval, self.timeout)
        if not (self.timeout <= self.stage_timeout and self.timeout <= self.join_timeout):
            raise LinkConfigError(
                f"link stage_timeout {self.stage_timeout}s and join_timeout {self.join_timeout}s must be >= "
                f"timeout {self.timeout}s: the supervisor decides first, a stage only ends itself afterwards"
            )
        if self.plaintext:
            require_loopback(self.endpoint, "a plaintext link")
            if self.secret_key is not None or self.allow:
                raise LinkConfigError("a plaintext link takes no keys: drop the keys or the plaintext flag")
        elif self.secret_key is None or not self.allow:
            raise LinkConfigError(
                "a link needs the server's secret key and at least one allowed stage key "
                "(create them with `omni-errors keys`), or plaintext on loopback"
            )
        _check_bounds(self.hwm, self.max_message)

    def curve_keys(self) -> CurveKeys | None:
        """The supervisor's key pair and the stages' allowed keys, or None for plaintext."""
        if self.plaintext:
            return None
        from omni_errors.security.keys import CurveKeys, load_allowed, load_secret

        assert self.secret_key is not None  # refused without it
        with _key_errors():
            public, secret = load_secret(self.secret_key)
            return CurveKeys(public, secret, allowed=load_allowed(self.allow))


@dataclass(frozen=True)
class StageConnectConfig:
    """The stage's side: where the server listens, the stage's secret key, the server's public key."""

    endpoint: str
    secret_key: Path | None = None
    server_key: Path | None = None
    plaintext: bool = False
    connect_timeout: float = 60.0  # to reach the server and be welcomed (it may start after us)
    hwm: int = 1000
    max_message: int = 16 << 20
    linger: float = 1.0

    def __post_init__(self) -> None:
        endpoint_host(self.endpoint)
        if self.plaintext:
            require_loopback(self.endpoint, "a plaintext link")
            if self.secret_key is not None or self.server_key is not None:
                raise LinkConfigError("a plaintext link takes no keys: drop the keys or the plaintext flag")
        elif self.secret_key is None or self.server_key is None:
            raise LinkConfigError(
                "a stage needs its own secret key and the server's public key "
                "(create them with `omni-errors keys`), or plaintext on loopback"
            )
        if self.connect_timeout <= 0:
            raise LinkConfigError(f"connect timeout {self.connect_timeout}s must be > 0")
        _check_bounds(self.hwm, self.max_message)

    def curve_keys(self) -> CurveKeys | None:
        """The stage's key pair and the server's public key, or None for plaintext."""
        if self.plaintext:
            return None
        from omni_errors.security.keys import CurveKeys, load_public, load_secret

        assert self.secret_key is not None and self.server_key is not None  # refused without them
        with _key_errors():
            public, secret = load_secret(self.secret_key)
            return CurveKeys(public, secret, server=load_public(self.server_key))
