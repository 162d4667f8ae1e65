"""What the audit follows beyond one call site: helpers of the audited tree that send exception text
to a client or default their status to 4xx (one call deep, across files), payload builders inside a
sink, WebSocket close reasons and replies, client-error raises; and the precision fixes of OE205/OE303."""

from __future__ import annotations

from audit_helpers import AuditSnippets, messages, rule_lines

HELPERS = """\
from http import HTTPStatus
from fastapi.responses import JSONResponse

def _speech_error(message, err_type="BadRequestError", status_code=HTTPStatus.BAD_REQUEST):
    return JSONResponse({"error": {"message": message, "type": err_type}}, status_code=status_code)

class Handler:
    async def _send_error(self, websocket, message):
        await websocket.send_json({"type": "error", "message": f"error: {message}"})

def error_payload(code, message):
    return {"type": "error", "code": code, "message": message}

def log_it(message):
    print(message)
"""


def test_exception_text_followed_into_the_trees_helpers(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "helpers.py": HELPERS,
            "routes.py": """\
            from .helpers import Handler, _speech_error, error_payload, log_it

            class Speech(Handler):
                async def upload(self, websocket, g):
                    try:
                        return g()
                    except ValueError as e:
                        return _speech_error(str(e))
                    except KeyError as e:
                        await self._send_error(websocket, f"Internal error: {e}")
                    except OSError as e:
                        await websocket.send_json(error_payload("io", str(e)))
                    except RuntimeError as e:
                        await websocket.close(code=1011, reason=str(e))
                    except TypeError as e:
                        log_it(str(e))
                        return _speech_error("fixed text", status_code=500)
            """,
        }
    )
    assert rule_lines(report, "OE205") == [("OE205", 8), ("OE205", 10), ("OE205", 12), ("OE205", 14)]
    assert messages(report, "OE205") == [
        "exception text passed to `_speech_error(...)`, which sends it to a client",
        "exception text passed to `_send_error(...)`, which sends it to a client",
        "exception text passed to `error_payload(...)`, which sends it to a client",
        "exception text placed in `close(...)`",
    ]
    # The helper's status defaults to 400: `except ValueError` calling it without a status answers 4xx.
    assert rule_lines(report, "OE201") == [("OE201", 7)]
    assert messages(report, "OE201") == ["`except ValueError` answers `_speech_error` (its status defaults to 400)"]


def test_value_error_answered_by_a_client_error_or_a_websocket_reply(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "helpers.py": HELPERS,
            "m.py": """\
            from vllm_omni.errors import OmniClientError
            from .helpers import Handler

            def parse(x):
                try:
                    return int(x)
                except ValueError as exc:
                    raise OmniClientError(str(exc)) from exc

            async def session(websocket, x):
                try:
                    return int(x)
                except ValueError:
                    await websocket.send_json({"type": "error", "message": "bad"})

            class H(Handler):
                async def run(self, websocket, x):
                    try:
                        return int(x)
                    except ValueError:
                        await self._send_error(websocket, "bad input")

            def internal(x):
                try:
                    return int(x)
                except ValueError:
                    raise RuntimeError("internal") from None
            """,
        }
    )
    assert rule_lines(report, "OE201") == [("OE201", 7), ("OE201", 13), ("OE201", 20)]
    assert messages(report, "OE201") == [
        "`except ValueError` answers `raise OmniClientError` (a 4xx client error)",
        "`except ValueError` answers `send_json` (a WebSocket error reply: the client's fault)",
        "`except ValueError` answers `_send_error`, which sends the error to the client",
    ]


def test_public_messages_and_internal_error_dicts_are_not_leaks(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "api.py": """\
            from fastapi import APIRouter, HTTPException
            from vllm_omni.errors import OmniClientError

            router = APIRouter()

            @router.get("/v1/x")
            def route(g):
                try:
                    return g()
                except OmniClientError as e:
                    raise HTTPException(status_code=e.status_code, detail=e.message) from e
                except Exception as e:
                    return {"error": str(e)}
            """,
            "worker.py": """\
            def rpc(g):
                try:
                    return g()
                except Exception as e:
                    return {"status": "error", "error": str(e)}
            """,
        }
    )
    # The client error's message is public by design; a worker's RPC reply dict never reaches a client.
    assert [(s.key_path, s.line) for s in report.sites if s.rule == "OE205"] == [("pkg/api.py", 13)]


def test_waits_that_are_bounded_or_not_waits(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import asyncio
            import multiprocessing
            from contextvars import ContextVar
            import torch.distributed as dist
            import zmq

            _CTX: ContextVar[int | None] = ContextVar("ctx", default=None)

            def current():
                return _CTX.get()

            def make_socket(ctx):
                sock = ctx.socket(zmq.REQ)
                sock.setsockopt(zmq.RCVTIMEO, 5000)
                sock.setsockopt(zmq.SNDTIMEO, 5000)
                return sock

            def query(ctx):
                sock = make_socket(ctx)
                sock.send(b"q")
                return sock.recv()

            def serve(ctx):
                router = ctx.socket(zmq.ROUTER)
                identity, _, payload = router.recv_multipart()
                router.send_multipart([identity, b"", payload])

            async def loop(sock, stop):
                recv_task = asyncio.ensure_future(sock.recv())
                stop_task = asyncio.ensure_future(stop.wait())
                await asyncio.wait({recv_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)

            def start():
                reader, writer = multiprocessing.Pipe(duplex=False)
                return reader.recv()

            def exchange(tensor):
                dist.isend(tensor, 1).wait()
            """,
        }
    )
    assert rule_lines(report, "OE303") == [("OE303", 25), ("OE303", 35), ("OE303", 38)]
    assert messages(report, "OE303") == [
        "blocking zmq `recv_multipart()` without NOBLOCK or a deadline",
        "multiprocessing Pipe `recv()` without `poll(timeout)` waits forever",
        "`.wait()` on a torch.distributed Work without a timeout (waits up to the process group's timeout)",
    ]


def test_an_annotated_error_body_local_is_known(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            from fastapi import APIRouter

            router = APIRouter()

            @router.post("/v1/x")
            async def create(serving, request):
                error: ErrorResponse = serving.create_error_response("bad")
                return error
            """,
        }
    )
    assert rule_lines(report, "OE204") == [("OE204", 8)]
