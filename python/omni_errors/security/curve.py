"""CURVE on a ZMQ socket, the ZAP allow-list behind it, and which addresses may stay plaintext.

One setup for the reference pipeline's remote link (`omni_errors_tools.lifecycle.remote`) and for the
vLLM-Omni plugin's multi-node sockets (`omni_errors_vllm_omni.sockets`):

- a binding socket is a CURVE server behind a ZAP allow-list of public keys, checked by
  `zmq.auth`'s authenticator thread: a peer whose key is not allowed never completes the
  handshake, so not one of its frames is delivered. Refusals are logged once per key, for at most
  `MAX_REFUSALS_LOGGED` keys, so a flood of keys cannot flood the log;
- a connecting socket is a CURVE client that authenticates the server's public key;
- plaintext is only ever right on loopback, and only an IP literal is loopback (`is_loopback`):
  a name, `localhost` included, resolves wherever the host's resolver says.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Any

import zmq
from zmq.auth.thread import ThreadAuthenticator

from omni_errors.security.keys import CurveKeys

__all__ = ["MAX_REFUSALS_LOGGED", "AllowList", "as_client", "as_server", "endpoint_is_loopback", "is_loopback"]

#: Distinct refused keys logged per allow-list; later ones are counted, not logged.
MAX_REFUSALS_LOGGED = 64


def is_loopback(host: str) -> bool:
    """Whether `host` is a loopback IP literal (127.0.0.0/8, ::1; an IPv6 zone such as `%lo` is allowed)."""
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0]).is_loopback
    except ValueError:
        return False  # a name, or a wildcard: it could be anywhere


def endpoint_is_loopback(endpoint: str) -> bool:
    """Whether a `tcp://HOST:PORT` endpoint's host is loopback (`is_loopback`); False for any other form."""
    scheme, sep, rest = endpoint.partition("://")
    return scheme == "tcp" and bool(sep) and is_loopback(rest.rpartition(":")[0])


class AllowList:
    """`zmq.auth`'s credentials provider: a key is allowed if it is in `allowed`; refusals are logged
    (once per key, `MAX_REFUSALS_LOGGED` keys at most) and each decision is passed to `on_result`."""

    def __init__(
        self, allowed: frozenset[bytes], log: logging.Logger, on_result: Callable[[bool], None] | None = None
    ) -> None:
        self._allowed = allowed
        self._log = log
        self._on_result = on_result
        self._logged: set[bytes] = set()

    def callback(self, domain: str, key: bytes) -> bool:
        allowed = key in self._allowed
        if self._on_result is not None:
            self._on_result(allowed)
        if not allowed and key not in self._logged and len(self._logged) < MAX_REFUSALS_LOGGED:
            self._logged.add(key)
            self._log.warning(
                "omni-errors: refused a peer whose CURVE key is not allowed: %s", key.decode("ascii", "replace")
            )
        return allowed

    def start(self, context: zmq.Context[Any], *, domain: str = "*") -> ThreadAuthenticator:
        """The ZAP handler of `context`, started, asking this list about CURVE peers of `domain`.

        The caller stops it (`stop()`) before the context terminates: its socket would keep
        `term()` waiting."""
        auth = ThreadAuthenticator(context, log=self._log.getChild("zap"))
        auth.start()
        auth.configure_curve_callback(domain, credentials_provider=self)
        return auth


def as_server(socket: zmq.Socket[Any], keys: CurveKeys, *, domain: str | None = None) -> None:
    """Make `socket` (before it binds) a CURVE server with `keys`; its context's ZAP handler
    (`AllowList.start`) decides who gets in. `domain` names the ZAP domain it asks about."""
    if domain is not None:
        socket.setsockopt(zmq.ZAP_DOMAIN, domain.encode())
    socket.setsockopt(zmq.CURVE_SERVER, 1)
    socket.setsockopt(zmq.CURVE_PUBLICKEY, keys.public)
    socket.setsockopt(zmq.CURVE_SECRETKEY, keys.secret)


def as_client(socket: zmq.Socket[Any], keys: CurveKeys) -> None:
    """Make `socket` (before it connects) a CURVE client with `keys` that authenticates `keys.server`."""
    assert keys.server is not None, "a CURVE client authenticates a server: its key is needed"
    socket.setsockopt(zmq.CURVE_SERVERKEY, keys.server)
    socket.setsockopt(zmq.CURVE_PUBLICKEY, keys.public)
    socket.setsockopt(zmq.CURVE_SECRETKEY, keys.secret)
