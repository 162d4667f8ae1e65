"""Lifecycle rules: `os._exit` (OE301), SystemExit in signal handlers (OE302), waits without a
deadline (OE303)."""

from __future__ import annotations

from audit_helpers import AuditSnippets, messages, rule_lines


def test_os_exit_in_every_spelling(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import atexit
            import os
            import os as o
            from os import _exit

            def die(code):
                if code == 1:
                    os._exit(1)
                if code == 2:
                    o._exit(2)
                if code == 3:
                    _exit(3)
                atexit.register(os._exit, 4)

            def unrelated(obj):
                obj._exit()
            """
        }
    )
    assert rule_lines(report, "OE301") == [("OE301", 8), ("OE301", 10), ("OE301", 12), ("OE301", 13)]


def test_system_exit_in_signal_handlers(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import functools
            import signal
            import sys

            def on_term(signum, frame):
                raise SystemExit(128 + signum)

            def not_a_handler():
                raise SystemExit(1)

            def on_hup(signum, frame, name):
                sys.exit(0)

            class Server:
                def __init__(self, loop):
                    signal.signal(signal.SIGINT, self._on_int)
                    loop.add_signal_handler(signal.SIGUSR1, lambda: sys.exit(3))

                def _on_int(self, signum, frame):
                    exit(2)

            def main():
                def handler(signum, frame):
                    raise SystemExit
                signal.signal(signal.SIGTERM, on_term)
                signal.signal(signal.SIGQUIT, handler)
                signal.signal(signal.SIGHUP, functools.partial(on_hup, name="x"))
                signal.signal(signal.SIGUSR2, signal.SIG_IGN)
            """
        }
    )
    assert rule_lines(report, "OE302") == [("OE302", 6), ("OE302", 12), ("OE302", 17), ("OE302", 20), ("OE302", 24)]


def test_waits_without_a_deadline(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "m.py": """\
            import asyncio
            import contextvars
            import queue
            import threading

            REQUEST = contextvars.ContextVar("request")

            async def waits(q: queue.Queue, t: threading.Thread, ev: threading.Event, aq: asyncio.Queue, d: dict):
                q.get()
                q.get(True)
                q.get(block=True, timeout=None)
                t.join()
                ev.wait()
                await aq.get()
                q.get(timeout=1.0)
                q.get(False)
                q.get_nowait()
                d.get("key")
                REQUEST.get()
                t.join(5)
                ", ".join(["a", "b"])
                await asyncio.wait_for(aq.get(), timeout=2)
                async with asyncio.timeout(1):
                    await aq.get()
                connector.get(from_stage=0, to_stage=1)
            """
        }
    )
    assert rule_lines(report, "OE303") == [
        ("OE303", 9),
        ("OE303", 10),
        ("OE303", 11),
        ("OE303", 12),
        ("OE303", 13),
        ("OE303", 14),
    ]
    assert messages(report, "OE303")[3] == "`.join()` without a timeout (Thread/Process.join waits forever)"


def test_blocking_zmq_calls_only_in_modules_that_import_zmq(audit_snippets: AuditSnippets) -> None:
    report = audit_snippets(
        {
            "uses_zmq.py": """\
            import zmq

            def loop(sock, parts):
                sock.recv()
                sock.send_multipart(parts)
                sock.recv(zmq.NOBLOCK)
                sock.send(b"x", flags=zmq.DONTWAIT)
                sock.recv_multipart(flags=0)
            """,
            "no_zmq.py": """\
            def loop(sock):
                sock.recv()
            """,
        }
    )
    zmq_sites = [(s.path.rpartition("/")[2], s.line) for s in report.sites if s.rule == "OE303"]
    assert zmq_sites == [("uses_zmq.py", 4), ("uses_zmq.py", 5), ("uses_zmq.py", 8)]
