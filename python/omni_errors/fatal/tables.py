"""The exit-code tables of the docs and `omni-errors doctor`, generated from `ExitCode`, `MEANINGS`
and `PRECEDENCE`, so that no copy of a code's meaning or of the order is written by hand.

The docs hold each table between the markers of `generated(name, ...)`, and a test compares the
committed block with this module's: `docs/lifecycle.md` lists every code (`omni-errors catalog
--exit-codes` prints the block), `docs/vllm-omni.md` the codes a vLLM-Omni server exits with
(`omni-errors doctor --exit-codes`).
"""

from __future__ import annotations

from collections.abc import Iterable

from omni_errors.fatal.exitcodes import MEANINGS, ExitCode
from omni_errors.fatal.policy import PRECEDENCE

__all__ = ["generated", "in_order", "markdown_table", "precedence_text"]


def in_order(codes: Iterable[ExitCode] = ExitCode) -> list[ExitCode]:
    """`codes` as the tables list them: the fatal ones by precedence (the winner first), then the rest."""
    chosen = set(codes)
    return [c for c in PRECEDENCE if c in chosen] + sorted(chosen - set(PRECEDENCE))


def precedence_text(codes: Iterable[ExitCode] = PRECEDENCE) -> str:
    """The order of `codes` in one line: `82 (STARTUP_FAILURE) > 81 (OOM) > ...`."""
    return " > ".join(f"{int(c)} (`{c.name}`)" for c in in_order(codes) if c in PRECEDENCE)


def markdown_table(codes: Iterable[ExitCode] = ExitCode) -> str:
    """A Markdown table of `codes` (code, name, when) in `in_order`, and the precedence among them."""
    codes = in_order(codes)
    rows = ["| code | name | when |", "|---:|---|---|"]
    rows += [f"| {int(c)} | `{c.name}` | {MEANINGS[c]} |" for c in codes]
    rows += ["", f"When a process sees several fatal failures, the code listed first wins: {precedence_text(codes)}."]
    return "\n".join(rows) + "\n"


def generated(name: str, body: str) -> str:
    """`body` between the markers that say it is generated, and from what."""
    return f"<!-- generated: {name}, from omni_errors.fatal (do not edit by hand) -->\n{body}<!-- end of {name} -->\n"
