"""What one module does to its zmq sockets, read from its text: where a receive or send timeout is set,
which functions make sockets with one, and which sockets are ROUTERs (OE303).

A textual reading, like the zmq check itself: a socket is known by the expression that names it, an
attribute (`self._router`) anywhere in the module, a local name (`sock`) inside the function that sets
it (see `key`); a function that calls `setsockopt(zmq.RCVTIMEO, ...)` is taken to set it on
the socket it makes and returns (`sock = self._get_req_socket(addr)`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SETSOCKOPT = re.compile(r"([A-Za-z_][\w.]*)\.setsockopt\(\s*zmq\.(RCVTIMEO|SNDTIMEO)\b")
_ATTRIBUTE = re.compile(r"([A-Za-z_][\w.]*)\.(rcvtimeo|sndtimeo)\s*=")
_DEF = re.compile(r"^[ \t]*(?:async[ \t]+)?def[ \t]+(\w+)", re.MULTILINE)
_ROUTER_ASSIGN = re.compile(r"([A-Za-z_][\w.]*)(?:[ \t]*:[^=\n]+)?[ \t]*=[^=\n][^\n]*\bzmq\.ROUTER\b")
_ROUTER_WITH = re.compile(r"\bzmq\.ROUTER\b[^\n]*\)[ \t]+as[ \t]+(\w+)")

RECV = "RCVTIMEO"
SEND = "SNDTIMEO"


@dataclass(slots=True)
class SocketFacts:
    """Sockets of one module: timeouts by socket expression and by maker function, and ROUTER sockets."""

    timeouts: dict[str, set[str]] = field(default_factory=dict)  # key -> {"RCVTIMEO"}
    makers: dict[str, set[str]] = field(default_factory=dict)  # "_get_req_socket" -> {"RCVTIMEO", "SNDTIMEO"}
    routers: set[str] = field(default_factory=set)  # keys


def key(function: str, socket: str) -> str:
    """How a socket is known: `self._router` module-wide, a local name within its function."""
    return socket if "." in socket else f"{function}:{socket}"


def socket_facts(text: str) -> SocketFacts:
    facts = SocketFacts()
    defs = [(m.start(), m.group(1)) for m in _DEF.finditer(text)]
    for pattern in (_SETSOCKOPT, _ATTRIBUTE):
        for m in pattern.finditer(text):
            option = m.group(2).upper()
            function = _enclosing_def(defs, m.start())
            facts.timeouts.setdefault(key(function, m.group(1)), set()).add(option)
            if function:
                facts.makers.setdefault(function, set()).add(option)
    for pattern in (_ROUTER_ASSIGN, _ROUTER_WITH):
        facts.routers.update(key(_enclosing_def(defs, m.start()), m.group(1)) for m in pattern.finditer(text))
    return facts


def _enclosing_def(defs: list[tuple[int, str]], position: int) -> str:
    """The last `def` before `position` (the function a statement is in, for code that is not nested)."""
    name = ""
    for start, found in defs:
        if start > position:
            break
        name = found
    return name
