"""Suppression comments (a reason is required) and files that cannot be audited (never skipped)."""

from __future__ import annotations

from pathlib import Path

from audit_helpers import AuditSnippets, messages, rule_lines
from omni_errors_audit import audit


def test_a_suppression_with_a_reason_suppresses_its_code_on_its_line(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            def parse(argv):
                if not argv:
                    raise ValueError("usage: tool FILE")  # omni-errors: ignore[OE101]: CLI usage error, never served
                if len(argv) > 2:
                    raise ValueError(  # omni-errors: ignore[OE101,OE103] -- argparse-style error
                        "too many arguments"
                    )
                raise TypeError("not suppressed: another code")  # omni-errors: ignore[OE101]: wrong code
            """
        }
    )
    suppressed = [(s.rule, s.line, s.suppressed) for s in report.sites if s.suppressed]
    assert suppressed == [
        ("OE101", 3, "CLI usage error, never served"),
        ("OE101", 5, "argparse-style error"),
    ]
    # Every code that suppresses nothing is reported, also beside one that does (line 5's OE103).
    assert rule_lines(report, "OE102", "OE002") == [("OE002", 5), ("OE002", 8), ("OE102", 8)]
    assert messages(report, "OE002")[0] == "suppression of OE103 matches no site on this line (its other codes do)"


def test_a_suppression_on_the_last_line_of_a_multi_line_site(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            def f():
                raise ValueError(
                    "long message"
                )  # omni-errors: ignore[OE101]: kept until the 0.32 migration
            """
        }
    )
    assert [(s.rule, s.suppressed) for s in report.sites] == [("OE101", "kept until the 0.32 migration")]


def test_invalid_suppressions_are_reported_and_suppress_nothing(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            def f(x):
                if x == 1:
                    raise ValueError("a")  # omni-errors: ignore[OE101]
                if x == 2:
                    raise ValueError("b")  # omni-errors: ignore[OE999]: no such rule
                if x == 3:
                    raise ValueError("c")  # omni-errors: ignore OE101 because
                text = "# omni-errors: ignore[OE101]"  # the marker inside a string is not a comment
                raise ValueError(text)
            """
        }
    )
    assert rule_lines(report, "OE001") == [("OE001", 3), ("OE001", 5), ("OE001", 7)]
    assert rule_lines(report, "OE101") == [("OE101", 3), ("OE101", 5), ("OE101", 7), ("OE101", 9)]
    assert all(s.suppressed is None for s in report.sites)
    assert messages(report, "OE001")[0].startswith("suppression without a reason; write `# omni-errors: ignore[")
    assert "unknown rule code OE999" in messages(report, "OE001")[1]
    assert "malformed suppression comment" in messages(report, "OE001")[2]


def test_unparsable_files_are_counted_and_reported(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "good.py").write_text("raise ValueError('x')\n", encoding="utf-8")
    (tree / "syntax.py").write_text("def f(:\n    pass\n", encoding="utf-8")
    (tree / "nul.py").write_bytes(b"x = 1\x00\n")
    (tree / "latin1.py").write_bytes(b"# -*- coding: latin-1 -*-\nname = '\xe9'\nraise TypeError(name)\n")
    (tree / "undecodable.py").write_bytes(b"name = '\xff\xfe'\n")
    report = audit([tree], use_cache=False, jobs=1, progress=False)
    assert len(report.files) == 5
    errors = {f.display.rpartition("/")[2]: error for f, error in report.unparsable}
    assert sorted(errors) == ["nul.py", "syntax.py", "undecodable.py"]
    assert errors["syntax.py"].startswith("syntax error: ")
    assert errors["undecodable.py"].startswith("cannot be decoded: ")
    assert sorted((s.path.rpartition("/")[2], s.rule) for s in report.sites) == [
        ("good.py", "OE101"),
        ("latin1.py", "OE102"),
        ("nul.py", "OE000"),
        ("syntax.py", "OE000"),
        ("undecodable.py", "OE000"),
    ]
    syntax_site = next(s for s in report.sites if s.path.endswith("syntax.py"))
    assert (syntax_site.line, syntax_site.column) == (1, 7)


def test_lines_are_numbered_as_python_numbers_them(tmp_path: Path) -> None:
    """Form feeds and U+2028 inside strings do not end a line for Python, so not for the audit."""
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "m.py").write_text("a = 'x\u2028y'  \x0c\nb = 1\r\nraise ValueError(a)\n", encoding="utf-8")
    report = audit([tree], use_cache=False, jobs=1, progress=False)
    (site,) = report.sites
    assert (site.line, site.column, site.excerpt) == (3, 1, "raise ValueError(a)")
    assert report.lines == 3
