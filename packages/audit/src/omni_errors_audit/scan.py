"""Audit one file: read, decode, parse, walk. A pure function of (module name, bytes), so its result
is cached by content hash; `scan_chunk` is what pool workers run.

A cheap token filter marks the lines where call-based rules can fire (waits, exits, signal handlers,
responses); the visitor walks the expressions of those statements, of `except` clauses and of functions
holding exception objects, and reads every other statement only for what it passes on (flows.py). A file
that cannot be read, decoded or parsed yields an OE000 site: it is counted, never skipped.
"""

from __future__ import annotations

import ast
import gc
import hashlib
import re
import tokenize
import warnings
from io import BytesIO

from omni_errors_audit import suppress
from omni_errors_audit.model import FileResult, RawSite, Suppression
from omni_errors_audit.sockets import SocketFacts, socket_facts
from omni_errors_audit.source import SourceText, count_lines, digest
from omni_errors_audit.visitor import FileVisitor

# The call-based checks report only on lines holding one of these (a superset: `str.find` is ~20x
# faster than one regex over the file); `.get`-style hits must also look like a call without a timeout.
_NEEDLES = ("exit", "signal", "esponse", ".get", ".join", ".wait", "send_", "close(")
# ... or one of these names, found among the hits of "Error" and "Exception" that every file is searched
# for anyway (each `str.find` pass over the file costs the same, so that halves the passes).
_ERROR_NEEDLES = ("Client", "Validation", "NotFound", "UnprocessableEntity", "GuardrailViolation")  # + "Error"
_ERROR_INFO = "Info"  # "Error" + this: ErrorInfo
_EXCEPTION_NEEDLES = ("HTTP", "WebSocket")  # + "Exception"
_ZMQ_NEEDLES = (".recv", ".send")
_WAIT_CALL = re.compile(r"\.(?:get|join|wait)\s*\(\s*(?:\)|#|True|block|timeout|None)")
_IMPORTS_ZMQ = re.compile(r"^\s*(?:import|from)\s+zmq\b", re.MULTILINE)
_RAISED_NAME = re.compile(r"raise\s+(\w+)")
# `def name` at the start of a line (after indentation and `async`): found by its literal `def` (a fast
# search), the line's start checked after; `^[ \t]*...` with re.MULTILINE tries every position, 7x slower.
_DEF = re.compile(r"def[ \t]+(\w+)")
_DEF_INDENT = re.compile(r"[ \t]*(?:async[ \t]+)?")

ChunkItem = tuple[str, str, bool, str]  # (path, module, is_package, key_path)


def content_key(data: bytes, module: str, is_package: bool, key_path: str) -> str:
    """The cache key of one file: its bytes, its module name (relative imports start there) and its
    key path (fingerprints include it)."""
    h = hashlib.sha256(data)  # SHA extensions make it the fastest hashlib digest here (~1 GB/s)
    h.update(f"\0{module}\0{int(is_package)}\0{key_path}".encode())
    return h.hexdigest()[:32]


def scan_chunk(items: list[ChunkItem]) -> list[tuple[str, str, FileResult]]:
    """(path, content key, result) for each file; run in a pool worker."""
    out = []
    for path, module, is_package, key_path in items:
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            out.append((path, "", unreadable(module, key_path, f"cannot be read: {exc.strerror or exc}")))
            continue
        try:
            result = scan_source(data, module, is_package, key_path)
        except Exception as exc:  # an audit bug on one file must not hide the other 1,608: report it
            result = unreadable(module, key_path, f"internal audit error: {type(exc).__name__}: {exc}")
        out.append((path, content_key(data, module, is_package, key_path), result))
    return out


def scan_source(data: bytes, module: str, is_package: bool, key_path: str) -> FileResult:
    """Everything the audit learns from one file's bytes."""
    try:
        text = _decode(data)
    except (UnicodeDecodeError, SyntaxError, LookupError) as exc:
        return unreadable(module, key_path, f"cannot be decoded: {exc}")
    source = SourceText(text, key_path)
    enabled = gc.isenabled()
    gc.disable()  # an AST has no cycles; collecting while building one costs ~15 % of the parse
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes and the like are not the audit's business
            tree = ast.parse(text)
    except SyntaxError as exc:
        return _unparsable(module, source, exc.lineno or 1, exc.offset or 1, f"syntax error: {exc.msg}")
    except (ValueError, RecursionError, MemoryError) as exc:
        return _unparsable(module, source, 1, 1, f"cannot be parsed: {type(exc).__name__}: {exc}")
    finally:
        if enabled:
            gc.enable()
    imports_zmq = "zmq" in text and _IMPORTS_ZMQ.search(text) is not None
    tracked = set(_RAISED_NAME.findall(text))
    hot, annotated = hot_lines(text, imports_zmq)
    sockets = socket_facts(text) if imports_zmq else SocketFacts()
    visitor = FileVisitor(module, is_package, source, hot, annotated, imports_zmq, tracked, sockets)
    visitor.run(tree)
    suppressions: list[Suppression] = []
    if suppress.MARKER in text:
        suppressions, invalid = suppress.find(text, source)
        visitor.sites.extend(invalid)
    return FileResult(
        module=module,
        lines=count_lines(text),
        sites=visitor.sites,
        raises=visitor.raises,
        classes=visitor.classes,
        aliases=visitor.aliases,
        functions=visitor.functions,
        suppressions=suppressions,
        reraises=visitor.reraises,
        flows=visitor.flows,
        members=visitor.members,
        fields=visitor.fields,
        models=sorted(set(visitor.models)),
        entries=sorted(set(visitor.entries)),
        renders=visitor.renders,
        defined=defined_names(text),
        forwarded=visitor.forwarded,
        leaks=visitor.leaks,
        returned=visitor.returned,
        unanswered=visitor.unanswered,
        handled=visitor.handled,
    )


def defined_names(text: str) -> list[str]:
    """The names of every `def` that starts a line (nested ones too, and those in strings), sorted."""
    found: set[str] = set()
    rfind, indent = text.rfind, _DEF_INDENT.fullmatch
    for m in _DEF.finditer(text):
        start = m.start()
        if indent(text, rfind("\n", 0, start) + 1, start):
            found.add(m.group(1))
    return sorted(found)


def hot_lines(text: str, imports_zmq: bool) -> tuple[list[int], list[int]]:
    """Sorted line numbers that the call-based checks may report on, and those that mention an
    Error or Exception (where a signature can annotate a parameter as an exception)."""
    needles = _NEEDLES + _ZMQ_NEEDLES if imports_zmq else _NEEDLES
    hits = _positions(text, needles)
    errors = _find_all(text, "Error")
    exceptions = _find_all(text, "Exception")
    # A hit stands for its line: the position of "Error" in "ClientError" is on the same line as its start.
    endswith, startswith = text.endswith, text.startswith
    hits.extend(i for i in errors if endswith(_ERROR_NEEDLES, 0, i) or startswith(_ERROR_INFO, i + 5))
    hits.extend(i for i in exceptions if endswith(_EXCEPTION_NEEDLES, 0, i))
    hits.sort()
    mentions = errors + exceptions
    mentions.sort()
    return _lines(text, hits), _lines(text, mentions)


def _positions(text: str, needles: tuple[str, ...]) -> list[int]:
    hits: list[int] = []
    find = text.find
    for needle in needles:
        wait = needle in (".get", ".join", ".wait")
        i = find(needle)
        while i >= 0:
            if not wait or _WAIT_CALL.match(text, i):
                hits.append(i)
            i = find(needle, i + 1)
    return hits


def _find_all(text: str, needle: str) -> list[int]:
    hits: list[int] = []
    find = text.find
    i = find(needle)
    while i >= 0:
        hits.append(i)
        i = find(needle, i + 1)
    return hits


def _lines(text: str, positions: list[int]) -> list[int]:
    out: list[int] = []
    line, pos = 1, 0
    for start in positions:
        line += text.count("\n", pos, start)
        pos = start
        if not out or out[-1] != line:
            out.append(line)
    return out


def unreadable(module: str, key_path: str, message: str) -> FileResult:
    return _unparsable(module, SourceText("", key_path), 1, 1, message)


def _unparsable(module: str, source: SourceText, line: int, column: int, message: str) -> FileResult:
    excerpt = source.line(line).strip()[:80]
    site = RawSite(
        "OE000", line, max(column, 1), line, "<module>", digest(source.key_path, "", message), excerpt, message
    )
    return FileResult(module, count_lines(source.text), [site], [], {}, {}, [], [], error=message)


def _decode(data: bytes) -> str:
    encoding, _ = tokenize.detect_encoding(BytesIO(data).readline)  # BOM or PEP 263 cookie; else UTF-8
    return data.decode(encoding)
