"""A remote stage written apart from the library's client: the link protocol by hand, error frames
from the reference encoder (tests/reference_decoder.py) pinned to another minor frame version.

Run as `python foreign_peer.py '<json>'` with `endpoint`, `secret_key`, `server_key` and `minor`
(and `extension`: append an extension tag this library does not know, as a newer writer would).
It joins as stage 0 ("ar"), answers every request with a REQUEST_ERROR frame of that minor, and
a request whose payload says `"fatal": true` with a FATAL frame (exit code 81), then exits;
`"hold": true` requests stay unanswered until then.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import zmq
import zmq.auth

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from omni_errors_tools.lifecycle.channels import Kind
from omni_errors_tools.lifecycle.remote.messages import STAGE_BEAT, SUPERVISOR_BEAT, Hello, header, parse_header, unpack
from reference_decoder import encode, encode_extension

UNKNOWN_TAG = 0x7A01  # no minor of this library defines it


def frame(record: dict[str, Any], cfg: dict[str, Any]) -> bytes:
    out = encode(record, minor=cfg["minor"])
    return encode_extension(out, UNKNOWN_TAG, b"a field from the future") if cfg.get("extension") else out


def main() -> None:
    cfg = json.loads(sys.argv[1])
    ctx = zmq.Context()
    sock = ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.ROUTING_ID, b"stage-0-foreign")
    public, secret = zmq.auth.load_certificate(cfg["secret_key"])
    sock.curve_serverkey = zmq.auth.load_certificate(cfg["server_key"])[0]
    sock.curve_publickey, sock.curve_secretkey = public, secret
    sock.connect(cfg["endpoint"])
    seq = 0

    def send(kind: int, *parts: bytes, code: int = 0) -> None:
        nonlocal seq
        sock.send_multipart([header(kind, seq, code), *parts])
        seq += 1

    hello = Hello(0, "ar", "f0re1gn", frame_version=(1, cfg["minor"]), host="foreign", pid=0)
    send(Kind.HELLO, hello.encode())
    sock.recv_multipart()  # WELCOME
    send(Kind.READY)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not sock.poll(100):
            continue
        parts = sock.recv_multipart()
        kind = parse_header(parts[0])[0]
        if kind == Kind.HEARTBEAT:
            send(Kind.HEARTBEAT, STAGE_BEAT.pack(0.0, SUPERVISOR_BEAT.unpack(parts[1])[0]))
        elif kind == Kind.ADD:
            request_id, payload = unpack(parts[1])
            record = {
                "message": f"prompt rejected by a minor-{cfg['minor']} stage",
                "category": "client",
                "status_code": 422,
                "error_type": "UnprocessableEntityError",
                "parameter": "prompt",
                "request_id": request_id,
                "stage_id": 0,
            }
            if payload.get("hold"):
                continue  # in flight until the FATAL frame answers it
            if payload.get("fatal"):
                dead = {"message": "lost", "category": "server", "status_code": 500, "error_type": "EngineDeadError"}
                send(Kind.FATAL, frame({**dead, "stage_id": 0, "fatal": True}, cfg), code=81)
                send(Kind.BYE, code=81)
                break
            send(Kind.REQUEST_ERROR, frame(record, cfg))
        elif kind == Kind.SHUTDOWN:
            send(Kind.BYE)
            break
    sock.close(linger=1000)
    ctx.term()


if __name__ == "__main__":
    main()
