"""Request-boundary rules: `except ValueError` as 4xx (OE201), broad excepts (OE202), text matching
(OE203), error bodies without a status (OE204), exception text sent to clients (OE205)."""

from __future__ import annotations

from audit_helpers import AuditSnippets, messages, rule_lines


def test_except_value_error_answering_4xx(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            from http import HTTPStatus
            from fastapi import HTTPException, status
            from fastapi.responses import JSONResponse

            class Serving:
                def a(self, g):
                    try:
                        return g()
                    except ValueError as e:
                        raise HTTPException(400, detail="bad request") from e

                def b(self, g):
                    try:
                        return g()
                    except (TypeError, ValueError):
                        return JSONResponse({"error": {"message": "bad"}}, status_code=HTTPStatus.BAD_REQUEST)

                def c(self, g):
                    try:
                        return g()
                    except ValueError as e:
                        return self.create_error_response(e)

                def d(self, g):
                    try:
                        return g()
                    except ValueError:
                        raise HTTPException(status_code=status.HTTP_422_UNPROCESSABLE_ENTITY.value)

                def not_4xx(self, g):
                    try:
                        return g()
                    except ValueError:
                        raise HTTPException(status_code=HTTPStatus.INTERNAL_SERVER_ERROR.value)

                def not_value_error(self, g):
                    try:
                        return g()
                    except TypeError:
                        raise HTTPException(400)

                def nested(self, g):
                    try:
                        return g()
                    except ValueError:
                        try:
                            return g()
                        except KeyError:
                            raise HTTPException(404)
            """
        }
    )
    assert rule_lines(report, "OE201") == [("OE201", 9), ("OE201", 15), ("OE201", 21), ("OE201", 27)]
    assert messages(report, "OE201")[:3] == [
        "`except ValueError` answers `HTTPException` with status 400",
        "`except ValueError` answers `JSONResponse` with status 400",
        "`except ValueError` answers `create_error_response` with status 400",
    ]


def test_broad_except_that_swallows(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import logging
            import sys

            log = logging.getLogger(__name__)

            def f(g):
                try:
                    g()
                except Exception:
                    pass
                try:
                    g()
                except:
                    log.warning("ignored")
                try:
                    g()
                except (KeyError, BaseException) as e:
                    return str(e)
                try:
                    g()
                except Exception:
                    log.exception("failed")
                    raise
                try:
                    g()
                except Exception as e:
                    raise RuntimeError("wrapped") from e
                try:
                    g()
                except BaseException:
                    sys.exit(1)
                try:
                    g()
                except ValueError:
                    pass
            """
        }
    )
    assert rule_lines(report, "OE202") == [("OE202", 9), ("OE202", 13), ("OE202", 17)]
    assert messages(report, "OE202")[1] == "bare `except:` without a raise swallows the error"


def test_error_text_matched_by_string(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import re
            import traceback

            def f(g, value):
                try:
                    g()
                except RuntimeError as e:
                    if "out of memory" in str(e):
                        return 1
                    message = str(e).lower()
                    if any(marker in message for marker in ("cuda error", "cublas")):
                        return 2
                    if str(e).startswith("CUDA"):
                        return 3
                    if re.search(r"oom", repr(e)):
                        return 4
                    if e.args[0] == "boom":
                        return 5
                    if "Traceback" in traceback.format_exc():
                        return 6
                if "not an exception" in str(value):
                    return 7
                return 0

            def is_oom(error: BaseException | None) -> bool:
                return error is not None and "out of memory" in f"{error}"
            """
        }
    )
    assert rule_lines(report, "OE203") == [
        ("OE203", 8),
        ("OE203", 11),
        ("OE203", 13),
        ("OE203", 15),
        ("OE203", 17),
        ("OE203", 19),
        ("OE203", 26),
    ]


def test_error_bodies_without_a_status(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            from fastapi import APIRouter
            from fastapi.responses import JSONResponse
            from vllm.entrypoints.openai.protocol import ErrorResponse

            router = APIRouter()

            @router.post("/v1/speech")
            async def speech(request, server):
                if request is None:
                    return server.create_error_response(message="no model")
                if request == 1:
                    return {"error": {"message": "bad", "code": 400}}
                err = ErrorResponse(error={"message": "bad", "code": 400})
                if request == 2:
                    return err
                if request == 3:
                    return JSONResponse(content=err.model_dump())
                if request == 4:
                    return JSONResponse(content=err.model_dump(), status_code=err.error.code)
                return {"ok": True}

            def helper(server):
                # not a route: serving helpers return ErrorResponse for the route to render
                return server.create_error_response(message="x")
            """
        }
    )
    assert rule_lines(report, "OE204") == [("OE204", 10), ("OE204", 12), ("OE204", 15), ("OE204", 17)]


def test_exception_text_in_client_visible_fields(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import logging
            from fastapi import HTTPException
            from fastapi.responses import JSONResponse

            log = logging.getLogger(__name__)

            class Serving:
                async def f(self, g, ws):
                    try:
                        return g()
                    except ValueError as exc:
                        raise HTTPException(400, detail=str(exc)) from exc
                    except KeyError as exc:
                        return JSONResponse({"error": {"message": f"failed: {exc}"}}, status_code=500)
                    except TypeError as exc:
                        return self.create_error_response(exc)
                    except RuntimeError as exc:
                        await ws.send_json({"type": "error", "error": str(exc)[:200]})
                    except OSError as exc:
                        log.error("stage failed: %s", str(exc))
            """
        }
    )
    assert rule_lines(report, "OE205") == [("OE205", 12), ("OE205", 14), ("OE205", 18)]
    assert messages(report, "OE205")[0] == "exception text placed in `HTTPException(...)`"
