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

On a release whose own code does not watch its stage links, they are set up here too (`liveness`):
an endpoint the plugin expects gets ZMTP heartbeats and a socket monitor before it binds or connects.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from pathlib import Path
from types import ModuleType
from typing import Any

import zmq
from omni_errors.security.curve import AllowList, as_client, as_server, endpoint_is_loopback
from omni_errors.security.keys import CurveKeys, load_directory

from omni_errors_vllm_omni import liveness
from omni_errors_vllm_omni.settings import KEYS_ENV, LOG_NAME

__all__ = ["SERVER_KEY", "load_keys", "make_bind", "make_connect", "make_destroy", "make_term"]

_log = logging.getLogger(LOG_NAME)

#: The name of the head's key: the server key every connection authenticates.
SERVER_KEY = "head"


def load_keys(directory: Path) -> CurveKeys:
    """Read DIR: exactly one `*.key_secret` (this host), `head.key`, and the `*.key` files allowed in."""
    return load_directory(directory, SERVER_KEY, setting=KEYS_ENV)


class _Settings:
    """The process's socket settings, read once (the first TCP socket reads them)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._loaded = False
        self._keys: CurveKeys | None = None
        self._warned = False
        # ZAP handlers by libzmq context: a context's CURVE servers are checked by its own handler.
        self._authenticators: dict[int, Any] = {}

    def keys(self) -> CurveKeys | None:
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

    def authenticate(self, socket: zmq.Socket[Any], keys: CurveKeys) -> None:
        """Start the ZAP handler of `socket`'s context once, with the allow-list."""
        context = socket.context
        with self._lock:
            if context.underlying in self._authenticators:
                return
            self._authenticators[context.underlying] = AllowList(keys.allowed, _log).start(context)
            weakref.finalize(context, self._forget, context.underlying)

    def stop_authenticator(self, context: zmq.Context[Any]) -> None:
        with self._lock:
            auth = self._authenticators.pop(context.underlying, None)
        if auth is not None:
            auth.stop()

    def _forget(self, underlying: int) -> None:
        with self._lock:
            self._authenticators.pop(underlying, None)


_settings = _Settings()


def _secure(socket: zmq.Socket[Any], addr: str, *, server: bool) -> None:
    keys = _settings.keys()
    if keys is None:
        if server and not endpoint_is_loopback(addr):
            _settings.warn_plaintext(addr)
        return
    if server:
        _settings.authenticate(socket, keys)
        as_server(socket, keys)
    else:
        as_client(socket, keys)


def make_bind(module: ModuleType, original: Any) -> Any:
    """`zmq.Socket.bind`: a TCP bind is a CURVE server (with keys); an expected stage link is watched."""

    def bind(self: zmq.Socket[Any], addr: str) -> Any:
        if isinstance(addr, str) and addr.startswith("tcp://"):
            _secure(self, addr, server=True)
        liveness.before(self, addr)
        result = original(self, addr)
        liveness.after(self, addr)
        return result

    return bind


def make_connect(module: ModuleType, original: Any) -> Any:
    """`zmq.Socket.connect`: a TCP connect is a CURVE client (with keys); an expected stage link is watched."""

    def connect(self: zmq.Socket[Any], addr: str) -> Any:
        if isinstance(addr, str) and addr.startswith("tcp://"):
            _secure(self, addr, server=False)
        liveness.before(self, addr)
        result = original(self, addr)
        liveness.after(self, addr)
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
