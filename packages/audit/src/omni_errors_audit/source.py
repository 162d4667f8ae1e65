"""One file's text as the reporters need it: code-point columns, excerpts, and a site's fingerprint
digest.

A digest is made of the file inside the package, the enclosing scope, and the *shape* of the site: the
syntax trees of its node and of the statement around it, without positions. The shape is the same however the code
is wrapped, indented, quoted or commented, and wherever it sits in the file, so reformatting and moving
code keep a site known (tests/audit/test_audit_fingerprints.py reformats the whole vllm-omni tree).
"""

from __future__ import annotations

import ast
import hashlib


class SourceText:
    """The decoded lines of one file."""

    __slots__ = ("_lines", "key_path", "text")

    def __init__(self, text: str, key_path: str) -> None:
        self.text = text
        self.key_path = key_path
        self._lines: list[str] | None = None  # split on first use: most files yield few sites

    @property
    def lines(self) -> list[str]:
        """The lines as `ast` numbers them: ended by LF, CRLF or CR, never by a form feed or U+2028."""
        if self._lines is None:
            text = self.text
            if "\r" in text:
                text = text.replace("\r\n", "\n").replace("\r", "\n")
            self._lines = text.split("\n")
        return self._lines

    def line(self, number: int) -> str:
        lines = self.lines
        return lines[number - 1] if 0 < number <= len(lines) else ""

    def column(self, number: int, byte_offset: int) -> int:
        """1-based code-point column of a UTF-8 byte offset (what `ast` gives) on line `number`."""
        text = self.line(number)
        if text.isascii():
            return byte_offset + 1
        return len(text.encode("utf-8")[:byte_offset].decode("utf-8", errors="ignore")) + 1

    def excerpt(self, number: int) -> str:
        """Line `number` without its comment and indentation, cut to 80 characters (for reports)."""
        text = strip_comment(self.line(number)).strip()
        return text if len(text) <= 80 else text[:77] + "..."

    def line_digest(self, number: int, scope: str) -> str:
        """The digest of a site that is a line of text, not code (a suppression comment)."""
        return digest(self.key_path, scope, "".join(self.line(number).split()))


def shape(node: ast.AST) -> str:
    """`node`'s syntax tree as text: node types, field names and constant values, without positions.

    Independent of line breaks, indentation, quotes, parentheses and comments, like `ast.unparse`, at a
    quarter of its cost (f-strings are what make unparse slow); fields that are None or empty are left
    out, so that a field added by a newer Python (`type_params`) changes no fingerprint.
    """
    out: list[str] = []
    stack: list[object] = [node]
    pop, push, emit = stack.pop, stack.append, out.append
    while stack:
        item = pop()
        if isinstance(item, ast.AST):
            if isinstance(item, ast.expr_context):
                continue
            emit(type(item).__name__)
            for name in reversed(item._fields):
                value = getattr(item, name, None)
                if value is not None and value != []:
                    push(value)
                    push(name)
        elif type(item) is list:
            emit("[")
            push("]")
            stack.extend(reversed(item))
        else:
            emit(repr(item))
    return "\x00".join(out)


def count_lines(text: str) -> int:
    """Source lines as `ast` counts them (a last line without a newline counts)."""
    ends = text.count("\n") + text.count("\r") - text.count("\r\n")
    return ends + (1 if text and not text.endswith(("\n", "\r")) else 0)


def digest(key_path: str, scope: str, text: str) -> str:
    """The location-independent part of a fingerprint."""
    return hashlib.blake2b(f"{key_path}\0{scope}\0{text}".encode(), digest_size=8).hexdigest()


def strip_comment(line: str) -> str:
    """`line` without its trailing `#` comment; a `#` inside a string literal is kept."""
    if "#" not in line:
        return line
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch == "#":
            return line[:i]
        elif ch in "'\"":
            quote = ch * 3 if line.startswith(ch * 3, i) else ch
            i += len(quote) - 1
        i += 1
    return line
