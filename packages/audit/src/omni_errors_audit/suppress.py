"""Per-line suppression comments: `# omni-errors: ignore[OE101]: the reason`.

A suppression names one or more codes and must give a reason; one without a reason, with an unknown
code or in another shape suppresses nothing and is itself reported (OE001). Comments are found with
`tokenize`, so the marker inside a string literal is not a suppression.
"""

from __future__ import annotations

import io
import re
import tokenize

from omni_errors_audit.model import RawSite, Suppression
from omni_errors_audit.rules import RULES
from omni_errors_audit.source import SourceText

MARKER = "omni-errors:"
SYNTAX = "# omni-errors: ignore[CODE[,CODE...]]: reason"
_PATTERN = re.compile(r"#\s*omni-errors:\s*ignore\[(?P<codes>[^\]]*)\](?P<reason>.*)$")


def find(text: str, source: SourceText) -> tuple[list[Suppression], list[RawSite]]:
    """The valid suppressions in `text`, and an OE001 site for each invalid one."""
    valid: list[Suppression] = []
    invalid: list[RawSite] = []
    for line, column, comment in _comments(text):
        if MARKER not in comment:
            continue
        problem, parsed = parse(comment, line)
        if parsed is not None:
            valid.append(parsed)
        else:
            digest = source.line_digest(line, "<module>")
            message = f"{problem}; write `{SYNTAX}`"
            excerpt = source.excerpt(line)
            invalid.append(RawSite("OE001", line, column + 1, line, "<module>", digest, excerpt, message))
    return valid, invalid


def parse(comment: str, line: int) -> tuple[str, Suppression | None]:
    """(problem, None) for an invalid suppression comment, ("", suppression) for a valid one."""
    match = _PATTERN.search(comment)
    if match is None:
        return "malformed suppression comment", None
    codes = tuple(c.strip() for c in match.group("codes").split(",") if c.strip())
    reason = match.group("reason").strip().lstrip(":-").strip()
    if not codes:
        return "suppression names no rule code", None
    unknown = [c for c in codes if c not in RULES]
    if unknown:
        return f"unknown rule code {', '.join(unknown)}", None
    if not reason:
        return "suppression without a reason", None
    return "", Suppression(line, codes, reason)


def _comments(text: str) -> list[tuple[int, int, str]]:
    out: list[tuple[int, int, str]] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out.append((tok.start[0], tok.start[1], tok.string))
    except (tokenize.TokenError, SyntaxError):  # the file parsed, so this is the unterminated tail only
        pass
    return out
