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
    for start, line in _lines_with(text, ("setsockopt", "timeo")):
        for pattern in (_SETSOCKOPT, _ATTRIBUTE):
            for m in pattern.finditer(line):
                option = m.group(2).upper()
                function = _enclosing_def(defs, start)
                facts.timeouts.setdefault(key(function, m.group(1)), set()).add(option)
                if function:
                    facts.makers.setdefault(function, set()).add(option)
    for start, line in _lines_with(text, ("zmq.ROUTER",)):
        for pattern in (_ROUTER_ASSIGN, _ROUTER_WITH):
            facts.routers.update(key(_enclosing_def(defs, start), m.group(1)) for m in pattern.finditer(line))
    return facts


def _lines_with(text: str, needles: tuple[str, ...]) -> list[tuple[int, str]]:
    """(offset, line) of each line holding one of `needles`: the patterns then run on those lines only."""
    found: dict[int, str] = {}
    for needle in needles:
        i = text.find(needle)
        while i >= 0:
            start = text.rfind("\n", 0, i) + 1
            end = text.find("\n", i)
            found[start] = text[start : end if end >= 0 else len(text)]
            i = text.find(needle, i + 1)
    return sorted(found.items())


def _enclosing_def(defs: list[tuple[int, str]], position: int) -> str:
    """The last `def` before `position` (the function a statement is in, for code that is not nested)."""
    name = ""
    for start, found in defs:
        if start > position:
            break
        name = found
    return name
