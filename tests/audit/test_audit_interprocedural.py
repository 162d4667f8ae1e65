"""Following the exception across the tree (interprocedural.py): sinks through the tree's own helpers and
methods, response models, errors handled rather than swallowed, what no route reaches, and the tree's
own protocol errors. Each class has sites that must be reported and sites that must not."""

from __future__ import annotations

from audit_helpers import AuditSnippets, messages, rule_lines

# -- sinks through the project's own helpers -------------------------------------------------------

HELPERS = """\
from fastapi.responses import JSONResponse

def _error_json(message, status_code=500):
    return JSONResponse({"error": {"message": message}}, status_code=status_code)

def speech_error(message):
    text = f"speech failed: {message}"
    return _error_json(text)

def log_only(message):
    print(message)
"""


def test_text_followed_through_helpers_of_other_modules_transitively(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "errors.py": HELPERS,
            "routes.py": """\
            from . import errors
            from .errors import log_only, speech_error

            def create(g):
                try:
                    return g()
                except KeyError as e:
                    return speech_error(str(e))
                except OSError as e:
                    return errors.speech_error(f"{e}")
                except TypeError as e:
                    log_only(str(e))
                    return None
            """,
        }
    )
    # Two calls deep (speech_error -> _error_json -> JSONResponse), by import and by module attribute;
    # the helper that only logs is not a sink.
    assert rule_lines(report, "OE205") == [("OE205", 8), ("OE205", 10)]
    assert messages(report, "OE205") == [
        "exception text passed to `speech_error(...)`, which sends it to a client",
        "exception text passed to `speech_error(...)`, which sends it to a client",
    ]


def test_self_methods_resolve_through_the_class_its_bases_and_overrides(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "ws.py": """\
            class Base:
                async def _send_error(self, websocket, message):
                    await self._send(websocket, {"type": "error", "message": message})

                async def _send(self, websocket, payload):
                    await websocket.send_json(payload)

                def _note(self, message):
                    return None

            class Session(Base):
                async def run(self, websocket, g):
                    try:
                        return g()
                    except KeyError as e:
                        await self._send_error(websocket, str(e))
                    except OSError as e:
                        self._note(str(e))

            class Quiet:
                async def _send_error(self, websocket, message):
                    print(message)

                async def run(self, websocket, g):
                    try:
                        return g()
                    except KeyError as e:
                        await self._send_error(websocket, str(e))
            """,
        }
    )
    # Session's `self._send_error` is Base's, which sends through `self._send`; Quiet's own method of the
    # same name only prints, so a call through `self` there is no sink (not matched by name alone).
    assert rule_lines(report, "OE205") == [("OE205", 16)]


def test_a_method_of_vllms_base_class_is_a_sink(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "realtime.py": """\
            from vllm.entrypoints.speech_to_text.realtime.connection import RealtimeConnection as Base

            class Connection(Base):
                async def generate(self, g):
                    try:
                        await g()
                    except Exception as e:
                        await self.send_error(str(e), "processing_error")
            """,
        }
    )
    assert rule_lines(report, "OE205") == [("OE205", 8)]


def test_generic_method_names_of_unknown_objects_are_not_matched(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "events.py": """\
            class Events:
                def error(self, message):
                    return self.ws.send_json({"type": "error", "message": message})

                def get(self, key):
                    return self.ws.send_json({"key": key})
            """,
            "worker.py": """\
            import logging

            logger = logging.getLogger(__name__)

            def run(cache, g):
                try:
                    return g()
                except Exception as e:
                    logger.error(f"failed: {e}")
                    return cache.get(str(e))
            """,
        }
    )
    # `logger.error` and `cache.get` say nothing about their object: not matched to `Events.error`/`.get`.
    assert rule_lines(report, "OE205") == []


# -- sinks through response models -----------------------------------------------------------------

MODELS = """\
from pydantic import BaseModel

class VideoError(BaseModel):
    code: int
    message: str

class VideoResponse(BaseModel):
    id: str
    error: "VideoError | None" = None

class Item(BaseModel):
    index: int
    error: str | None = None

class BatchResponse(BaseModel):
    results: list[Item]

class StreamError(BaseModel):
    error: dict

class StageReport(BaseModel):
    error: str
"""


def test_response_models_found_by_use_fields_and_annotations(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "protocol.py": MODELS,
            "serving.py": """\
            from fastapi import APIRouter
            from vllm.entrypoints.openai.engine.protocol import ErrorResponse
            from .protocol import BatchResponse, Item, StageReport, StreamError, VideoError, VideoResponse

            router = APIRouter()

            def video_error(exc: Exception) -> VideoError:
                return VideoError(code=500, message=str(exc))

            @router.get("/v1/videos/{video_id}")
            async def retrieve(video_id: str) -> VideoResponse:
                return VideoResponse(id=video_id)

            async def batch(items, g) -> BatchResponse | ErrorResponse:
                results = []
                for i, item in enumerate(items):
                    try:
                        g(item)
                    except Exception as e:
                        results.append(Item(index=i, error=str(e)))
                return BatchResponse(results=results)

            async def stream(g):
                try:
                    yield g()
                except Exception as exc:
                    chunk = StreamError(error={"message": str(exc), "code": 500})
                    yield f"data: {chunk.model_dump_json()}\\n\\n"

            def report(queue, g):
                try:
                    g()
                except Exception as exc:
                    queue.put(StageReport(error=str(exc)))
            """,
        }
    )
    # VideoError is the type of a field of the route's VideoResponse; Item a field of what a serving
    # function returns beside ErrorResponse; StreamError goes out in an SSE frame. StageReport reaches no
    # client.
    assert rule_lines(report, "OE205") == [("OE205", 8), ("OE205", 20), ("OE205", 27)]


def test_an_error_dict_carried_by_locals_into_a_server_sent_event(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "sse.py": """\
            import json

            async def stream(g):
                try:
                    yield g()
                except Exception as e:
                    error: dict = {"message": str(e), "type": "server_error"}
                    payload = {"type": "audio.error", "error": error}
                    data = json.dumps(payload)
                    yield f"event: audio.error\\ndata: {data}\\n\\n"
            """,
        }
    )
    assert rule_lines(report, "OE205") == [("OE205", 7)]
    assert messages(report, "OE205") == ["exception text placed in a server-sent event"]


# -- handled, not swallowed (OE202) ----------------------------------------------------------------


def test_errors_stored_and_raised_or_handed_to_a_failing_callee_are_handled(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "handled.py": """\
            try:
                import kernel
                _LOAD_ERROR = None
            except Exception as exc:
                _LOAD_ERROR = exc

            def use():
                if _LOAD_ERROR is not None:
                    raise RuntimeError("kernel unavailable") from _LOAD_ERROR

            def first_of(steps):
                error = None
                for step in steps:
                    try:
                        step()
                    except BaseException as exc:
                        error = error or exc
                if error is not None:
                    raise error

            def all_of(names, fetch):
                errors = []
                for name in names:
                    try:
                        return fetch(name)
                    except Exception as exc:
                        errors.append(f"{name}: {exc}")
                raise FileNotFoundError("; ".join(errors))

            class Engine:
                def _fail(self, exc: Exception) -> None:
                    for future in self.pending:
                        future.set_exception(exc)

                def _fail_engine(self, exc: Exception) -> None:
                    self.closed = True
                    self._fail(exc)

                def loop(self):
                    try:
                        self.step()
                    except Exception as exc:
                        self._fail_engine(exc)
                        return
            """,
        }
    )
    assert rule_lines(report, "OE202") == []


def test_what_still_counts_as_swallowed(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "swallowed.py": """\
            import logging

            logger = logging.getLogger(__name__)

            def _raise_if_cuda(error: BaseException) -> None:
                if isinstance(error, MemoryError):
                    raise error

            def fallback(g):
                try:
                    return g()
                except Exception as e:
                    _raise_if_cuda(e)
                    return None

            def kept_not_raised(g):
                last = None
                try:
                    g()
                except Exception as e:
                    last = e
                return last is None

            def sometimes(g, strict):
                try:
                    g()
                except Exception as e:
                    if strict:
                        logger.error("failed: %s", e)
                        stored = e
                    logger.warning("ignored")

            def logged(g):
                try:
                    g()
                except Exception as e:
                    logger.exception("failed: %s", e)
            """,
        }
    )
    # A callee that raises only some errors, an error kept but never raised, a store on one path only,
    # and a log: each still swallows.
    assert rule_lines(report, "OE202") == [("OE202", 12), ("OE202", 20), ("OE202", 27), ("OE202", 36)]


# -- not client-facing: what no route, handler or sink reaches --------------------------------------


def test_error_bodies_count_where_a_route_returns_them(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "bench.py": """\
            import aiohttp

            async def evaluate(cases, judge):
                try:
                    return await judge(cases)
                except Exception as exc:
                    return {"status": "failed", "error": str(exc)}
            """,
            "api.py": """\
            from fastapi import APIRouter

            router = APIRouter()

            def status(probe):
                try:
                    return {"ok": probe()}
                except Exception as exc:
                    return {"ok": False, "error": str(exc)}

            @router.get("/v1/status")
            async def get_status(request):
                return status(request.app.state.probe)
            """,
        }
    )
    # The benchmark's result dict reaches no client; the helper's does, through the route that returns it.
    assert [(s.key_path, s.line) for s in report.sites if s.rule == "OE205"] == [("pkg/api.py", 9)]


def test_a_validator_message_answers_4xx_where_its_caller_sends_it(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "adapters.py": """\
            class Adapter:
                def validate(self, request) -> str | None:
                    try:
                        float(request.scale)
                    except (TypeError, ValueError):
                        return "scale must be a number"
                    return self._validate_extra(request.extra)

                def _validate_extra(self, extra) -> str | None:
                    return None

            class Strict(Adapter):
                def _validate_extra(self, extra) -> str | None:
                    try:
                        parse(extra)
                    except ValueError as exc:
                        return str(exc)
                    return None

            def parse_count(value) -> int:
                try:
                    return int(value)
                except ValueError:
                    return 0
            """,
            "serving.py": """\
            from vllm.entrypoints.openai.engine.protocol import ErrorResponse

            class Serving:
                def create(self, request) -> ErrorResponse | None:
                    error = self.adapter.validate(request)
                    if error:
                        return self.create_error_response(error)
                    return None
            """,
        }
    )
    # The adapter's messages (and the subclass's override, which `self._validate_extra` may run) reach
    # the client as a 400; parse_count's fallback reaches no client.
    assert rule_lines(report, "OE201") == [("OE201", 5), ("OE201", 16)]
    assert rule_lines(report, "OE205") == [("OE205", 17)]


# -- the tree's own protocol errors ------------------------------------------------------------------


def test_a_protocol_error_sent_with_its_own_code_is_a_client_error(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "errors.py": """\
            class SessionError(RuntimeError):
                def __init__(self, message, *, code):
                    super().__init__(message)
                    self.code = code

            class InternalError(RuntimeError):
                pass
            """,
            "serving.py": """\
            from .errors import InternalError, SessionError

            async def open_session(websocket, engine, payload):
                try:
                    return await engine.open(payload)
                except SessionError as exc:
                    await websocket.send_json({"code": exc.code, "message": str(exc)})
                except InternalError as exc:
                    await websocket.send_json({"code": "internal", "message": str(exc)})
            """,
            "engine.py": """\
            from .errors import SessionError

            def resume(lease, generation):
                try:
                    lease.resume(generation)
                except ValueError as exc:
                    raise SessionError(str(exc), code="resume_conflict") from exc
            """,
        }
    )
    # SessionError's message is public (sent with its code): its own text is no leak, a ValueError's text
    # put into it is one, and raising it answers the ValueError with a client error. InternalError's text
    # is a leak.
    assert [(s.key_path, s.line) for s in report.sites if s.rule == "OE205"] == [
        ("pkg/engine.py", 7),
        ("pkg/serving.py", 9),
    ]
    assert [(s.key_path, s.line) for s in report.sites if s.rule == "OE201"] == [("pkg/engine.py", 6)]
    assert messages(report, "OE201") == [
        "`except ValueError` answers `raise SessionError` (a client error of the tree)"
    ]
