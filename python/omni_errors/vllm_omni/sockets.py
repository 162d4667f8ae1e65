"""The deployment's ZMQ sockets in vLLM-Omni's multi-node mode: who may connect, and which links are watched.

In multi-node mode the head binds every socket of the deployment (registration, each replica's
handshake and stage links, the coordinator's ROUTER and PUB) and the remote stages connect to
them over TCP. vLLM-Omni 0.30 neither authenticates nor encrypts them: any host that reaches
the registration port can join as a replica and is sent prompts, and now that a record from a
replica can end the head, it could end it too. Every bind and connect goes through pyzmq's
`Socket.bind` / `Socket.connect`, which the plugin wraps (manifest entries on pyzmq's public API),
so one setting secures them all, wherever vLLM-Omni creates them:

- `OMNI_ERRORS_VLLM_OMNI_KEYS=DIR` (keys made by `omni-errors keys DIR head stage-a ...`): every
  TCP socket becomes CURVE. A bind is a CURVE server with this host's key, behind a ZAP allow-list
  of the public keys in DIR (checked by `zmq.auth`'s authenticator: a peer whose key is not
  allowed never completes the handshake, so not one of its frames is delivered); a connect is a
  CURVE client with this host's key that authenticates the head's `head.key`. DIR holds exactly
  one secret key, this host's. IPC and inproc sockets (one host) are left alone.
- Without it the sockets stay plaintext, for peers without the plugin: the first TCP bind on an
  address other hosts can reach logs a warning that says so.

Stage links (`links`) are also watched here: an endpoint the plugin expects gets ZMTP heartbeats
before it binds or connects, and a socket monitor after.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import zmq

from omni_errors.vllm_omni import links
from omni_errors.vllm_omni.settings import KEYS_ENV

__all__ = ["SERVER_KEY", "Keys", "load_keys", "make_bind", "make_connect", "make_destroy", "make_term"]

_log = logging.getLogger("vllm.omni_errors")  # vLLM formats it in every process it starts

#: The name of the head's key: the server key every connection authenticates.
SERVER_KEY = "head"
_MAX_DENIED_LOGGED = 64


@dataclass(frozen=True, slots=True)
class Keys:
    """This host's CURVE keys, the head's public key, and the public keys allowed in."""

    public: bytes
    secret: bytes
    server: bytes
    allowed: frozenset[bytes]


def load_keys(directory: Path) -> Keys:
    """Read DIR: exactly one `*.key_secret` (this host), `head.key`, and the `*.key` files allowed in."""
    from omni_errors.security import keys

    if not directory.is_dir():
        raise keys.KeyFileError(f"{KEYS_ENV}={directory} is not a directory")
    secrets = sorted(directory.glob("*.key_secret"))
    if len(secrets) != 1:
        found = ", ".join(p.name for p in secrets) or "none"
        raise keys.KeyFileError(
            f"{KEYS_ENV}={directory} must hold exactly one secret key, this host's (found: {found})"
        )
    public, secret = keys.load_secret(secrets[0])
    server = keys.load_public(directory / f"{SERVER_KEY}.key")
    return Keys(public, secret, server, keys.load_allowed((directory,)))


class _Settings:
    """The process's socket settings, read once (the first TCP socket reads them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self._keys: Keys | None = None
        self._warned = False
        # ZAP handlers by libzmq context: a context's CURVE servers are checked by its own handler.
        self._authenticators: dict[int, Any] = {}

    def keys(self) -> Keys | None:
        with self._lock:
            if not self._loaded:
                directory = os.environ.get(KEYS_ENV)
                # A bad key directory raises here, at the first TCP socket: the process fails to start
                # rather than serve in plaintext when its operator asked for keys.
                self._keys = load_keys(Path(directory)) if directory else None
                self._loaded = True
                if self._keys is not None:
                    _log.info("omni-errors: CURVE on every TCP socket of the deployment (%s=%s)", KEYS_ENV, directory)
            return self._keys

    def warn_plaintext(self, addr: str) -> None:
        with self._lock:
            if self._warned:
                return
            self._warned = True
        _log.warning(
            "omni-errors: vLLM-Omni's multi-node sockets are plaintext and unauthenticated (%s): any host that "
            "reaches them can register as a replica, receive prompts and send records that end this head. "
            "Set %s to a directory of `omni-errors keys` (docs/vllm-omni.md, multi-node)",
            addr,
            KEYS_ENV,
        )

    def authenticate(self, socket: zmq.Socket[Any], keys: Keys) -> None:
        """Start the ZAP handler of `socket`'s context once, with the allow-list."""
        from zmq.auth.thread import ThreadAuthenticator

        context = socket.context
        with self._lock:
            if context.underlying in self._authenticators:
                return
            auth = ThreadAuthenticator(context)
            auth.start()
            auth.configure_curve_callback("*", credentials_provider=_AllowList(keys.allowed))
            self._authenticators[context.underlying] = auth
            weakref.finalize(context, self._forget, context.underlying)

    def stop_authenticator(self, context: zmq.Context[Any]) -> None:
        with self._lock:
            auth = self._authenticators.pop(context.underlying, None)
        if auth is not None:
            auth.stop()

    def _forget(self, underlying: int) -> None:
        with self._lock:
            self._authenticators.pop(underlying, None)


class _AllowList:
    """zmq.auth's credentials provider: a key is allowed if it is in the directory; refusals are logged."""

    def __init__(self, allowed: frozenset[bytes]) -> None:
        self._allowed = allowed
        self._logged: set[bytes] = set()

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self._allowed:
            return True
        if key not in self._logged and len(self._logged) < _MAX_DENIED_LOGGED:
            self._logged.add(key)
            _log.warning(
                "omni-errors: refused a peer whose CURVE key is not allowed: %s", key.decode("ascii", "replace")
            )
        return False


_settings = _Settings()


def _remote_reachable(addr: str) -> bool:
    host = addr[len("tcp://") :].rpartition(":")[0].strip("[]")
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host != "localhost"


def _secure(socket: zmq.Socket[Any], addr: str, *, server: bool) -> None:
    keys = _settings.keys()
    if keys is None:
        if server and _remote_reachable(addr):
            _settings.warn_plaintext(addr)
        return
    socket.curve_publickey = keys.public
    socket.curve_secretkey = keys.secret
    if server:
        _settings.authenticate(socket, keys)
        socket.curve_server = True
    else:
        socket.curve_serverkey = keys.server


def make_bind(module: ModuleType, original: Any) -> Any:
    """`zmq.Socket.bind`: a TCP bind is a CURVE server (with keys); an expected stage link is watched."""

    def bind(self: zmq.Socket[Any], addr: str) -> Any:
        if isinstance(addr, str) and addr.startswith("tcp://"):
            _secure(self, addr, server=True)
        links.before(self, addr)
        result = original(self, addr)
        links.after(self, addr)
        return result

    return bind


def make_connect(module: ModuleType, original: Any) -> Any:
    """`zmq.Socket.connect`: a TCP connect is a CURVE client (with keys); an expected stage link is watched."""

    def connect(self: zmq.Socket[Any], addr: str) -> Any:
        if isinstance(addr, str) and addr.startswith("tcp://"):
            _secure(self, addr, server=False)
        links.before(self, addr)
        result = original(self, addr)
        links.after(self, addr)
        return result

    return connect


def make_term(module: ModuleType, original: Any) -> Any:
    """`zmq.Context.term`: the context's ZAP handler stops first (its socket would keep `term` waiting)."""

    def term(self: zmq.Context[Any]) -> None:
        _settings.stop_authenticator(self)
        original(self)

    return term


def make_destroy(module: ModuleType, original: Any) -> Any:
    """`zmq.Context.destroy`: the context's ZAP handler stops before `destroy` closes its sockets under it."""

    def destroy(self: zmq.Context[Any], linger: int | None = None) -> None:
        _settings.stop_authenticator(self)
        original(self, linger)

    return destroy
