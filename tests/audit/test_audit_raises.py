"""Raise sites: raw builtins, semantic families, aliases, re-raises, `raise ... from ...`, variables."""

from __future__ import annotations

from audit_helpers import AuditSnippets, messages, rule_lines


def test_raw_raises_by_type(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            def f(x):
                if x == 1:
                    raise ValueError("bad x")
                if x == 2:
                    raise TypeError
                if x == 3:
                    raise RuntimeError("no") from None
                if x == 4:
                    raise OverflowError(x)
                raise NotImplementedError
            """
        }
    )
    assert rule_lines(report) == [("OE101", 3), ("OE102", 5), ("OE103", 7), ("OE104", 9), ("OE105", 10)]


def test_raise_from_counts_the_raised_class_once(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            def f(data):
                try:
                    return int(data)
                except KeyError as exc:
                    raise ValueError("not a number") from exc
            """
        }
    )
    assert rule_lines(report, "OE101", "OE102", "OE103") == [("OE101", 5)]


def test_aliased_builtins_and_modules(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import builtins
            from builtins import ValueError as VE
            import vllm.exceptions as ve
            from vllm.exceptions import VLLMValidationError as Invalid
            from vllm.v1.engine.exceptions import EngineDeadError

            def f(x):
                if x == 1:
                    raise VE("aliased")
                if x == 2:
                    raise builtins.TypeError("qualified")
                if x == 3:
                    raise ve.VLLMNotFoundError("module alias")
                if x == 4:
                    raise Invalid("name alias", parameter="x")
                raise EngineDeadError()
            """
        }
    )
    assert rule_lines(report) == [("OE101", 9), ("OE102", 11), ("OE901", 13), ("OE901", 15), ("OE901", 16)]


def test_function_local_import_alias(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            def f():
                from vllm.exceptions import VLLMValidationError as Bad
                raise Bad("x")
            """
        }
    )
    assert rule_lines(report) == [("OE901", 3)]


def test_omni_errors_types_count_as_their_own_family(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import omni_errors
            from omni_errors.semantics.exceptions import OmniConflictError

            def f(x):
                if x:
                    raise OmniConflictError("job already running")
                raise omni_errors.OmniStageTimeoutError("stage 1 timed out", stage_id=1)
            """
        }
    )
    assert rule_lines(report) == [("OE902", 6), ("OE902", 7)]


def test_project_subclass_of_a_family_member_across_files_and_reexports(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "errors.py": """\
            from vllm.exceptions import VLLMValidationError

            class VoiceError(VLLMValidationError):
                pass

            class LocalError(ValueError):
                pass
            """,
            "__init__.py": "from .errors import VoiceError\n",
            "api/__init__.py": "",
            "api/speech.py": """\
            from pkg import VoiceError
            from ..errors import LocalError

            def speak(voice):
                if voice is None:
                    raise VoiceError("unknown voice", parameter="voice")
                raise LocalError("a ValueError subclass is not a raw ValueError")
            """,
        }
    )
    assert rule_lines(report) == [("OE901", 6)]
    assert report.raised_classes["pkg.errors.LocalError"] == 1


def test_a_shadowed_builtin_is_not_the_builtin(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            class ValueError(Exception):
                pass

            def f():
                raise ValueError("the module's own class")
            """
        }
    )
    assert rule_lines(report, "OE101") == []
    assert report.raised_classes == {"pkg.m.ValueError": 1}


def test_reraises_are_not_new_sites(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import sys

            def f(g):
                try:
                    g()
                except ValueError:
                    raise
                except TypeError as exc:
                    raise exc
                except RuntimeError as exc:
                    raise exc.with_traceback(sys.exc_info()[2])
                except OverflowError as exc:
                    raise exc from None
            """
        }
    )
    assert [s for s in report.sites if s.rule.startswith("OE1")] == []
    assert report.reraises == 4


def test_raise_of_a_variable_bound_in_the_same_scope(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            from builtins import TypeError as TE

            def f(x):
                err = ValueError(f"bad {x}")
                if x:
                    raise err
                problem = TE("aliased, then bound")
                raise problem from None
            """
        }
    )
    assert rule_lines(report) == [("OE101", 6), ("OE102", 8)]
    assert messages(report, "OE101") == ["raw `raise ValueError` (`err` is bound to `ValueError(...)`)"]


def test_raises_whose_class_cannot_be_known(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            def make_error(msg):
                return ValueError(msg)

            class Stage:
                def fail(self, exc, x):
                    if x == 1:
                        raise exc
                    if x == 2:
                        raise self.error
                    if x == 3:
                        raise make_error("built elsewhere")
                    err = ValueError("one") if x else TypeError("two")
                    if x == 4:
                        raise err
                    other = ValueError("a")
                    other = TypeError("b")
                    raise other
            """
        }
    )
    assert rule_lines(report) == [("OE100", 7), ("OE100", 9), ("OE100", 11), ("OE100", 14), ("OE100", 17)]
    assert messages(report, "OE100") == [
        "cannot know what is raised: `exc` is a variable",
        "cannot know what is raised: the raised value is an attribute of an object",
        "cannot know what is raised: the result of `make_error()`, a function",
        "cannot know what is raised: `err` is a variable",
        "cannot know what is raised: `other` is bound to different or unknown values",
    ]
