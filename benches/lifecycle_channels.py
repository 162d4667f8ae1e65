"""Measure the lifecycle's channel options between two processes (run: python benches/lifecycle_channels.py).

- pipe: a `multiprocessing` pipe pair, Connection framing (what the lifecycle uses for messages);
- shm+pipe: the payload written into a SharedMemory slot with `encode_into`, a 1-byte pipe doorbell
  (Python has no futex, so a shm ring still needs a syscall to wake the reader);
- shm-poll: the reader spins on a sequence number in shm (no syscall; burns a core).
Each: round-trip latency of one error frame (ping-pong), and one-way throughput of 4 KiB batches.
"""

from __future__ import annotations

import multiprocessing as mp
import struct
import time
from multiprocessing import shared_memory
from multiprocessing.connection import Connection

import omni_errors

N_RT = 2000
N_TP = 5000
DETAILS = omni_errors.OmniErrorDetails(
    "The server had an error while processing your request.",
    "server",
    500,
    "InternalServerError",
    request_id="req-0123456789",
    stage_id=1,
    fatal=True,
)


def echo_pipe(rx: Connection, tx: Connection) -> None:
    while True:
        m = rx.recv_bytes()
        if m == b"q":
            return
        tx.send_bytes(m)


def echo_shm(rx: Connection, tx: Connection, name: str) -> None:
    shm = shared_memory.SharedMemory(name=name)
    while True:
        if rx.recv_bytes() == b"q":
            break
        n = struct.unpack_from("<I", shm.buf, 0)[0]
        d = omni_errors.decode(shm.buf[8 : 8 + n])
        m = omni_errors.encode_into(d, shm.buf, 8)
        struct.pack_into("<I", shm.buf, 0, m)
        tx.send_bytes(b"!")
    shm.close()


def echo_poll(name: str) -> None:
    shm = shared_memory.SharedMemory(name=name)
    seq = 0
    while True:
        while struct.unpack_from("<I", shm.buf, 4)[0] == seq:
            pass
        seq = struct.unpack_from("<I", shm.buf, 4)[0]
        if seq == 0xFFFFFFFF:
            break
        n = struct.unpack_from("<I", shm.buf, 0)[0]
        d = omni_errors.decode(shm.buf[8 : 8 + n])
        omni_errors.encode_into(d, shm.buf, 8)
        seq += 1
        struct.pack_into("<I", shm.buf, 4, seq)
    shm.close()


def main() -> None:
    ctx = mp.get_context("spawn")
    frame = omni_errors.encode(DETAILS)
    batch = bytes(4096)
    a_r, a_w = ctx.Pipe(duplex=False)
    b_r, b_w = ctx.Pipe(duplex=False)
    p = ctx.Process(target=echo_pipe, args=(a_r, b_w))
    p.start()
    a_w.send_bytes(frame)
    b_r.recv_bytes()
    t = time.perf_counter()
    for _ in range(N_RT):
        a_w.send_bytes(frame)
        omni_errors.decode(b_r.recv_bytes())
    rt_pipe = (time.perf_counter() - t) / N_RT
    t = time.perf_counter()
    for _ in range(N_TP):
        a_w.send_bytes(batch)
        b_r.recv_bytes()
    tp_pipe = N_TP * 4096 / (time.perf_counter() - t) / 1e6
    a_w.send_bytes(b"q")
    p.join()

    shm = shared_memory.SharedMemory(create=True, size=1 << 16)
    try:
        a_r, a_w = ctx.Pipe(duplex=False)
        b_r, b_w = ctx.Pipe(duplex=False)
        p = ctx.Process(target=echo_shm, args=(a_r, b_w, shm.name))
        p.start()
        t = None
        for i in range(N_RT + 1):
            if i == 1:
                t = time.perf_counter()
            n = omni_errors.encode_into(DETAILS, shm.buf, 8)
            struct.pack_into("<I", shm.buf, 0, n)
            a_w.send_bytes(b"!")
            b_r.recv_bytes()
            omni_errors.decode(shm.buf[8 : 8 + struct.unpack_from("<I", shm.buf, 0)[0]])
        assert t is not None
        rt_shm = (time.perf_counter() - t) / N_RT
        a_w.send_bytes(b"q")
        p.join()

        struct.pack_into("<II", shm.buf, 0, 0, 0)
        p = ctx.Process(target=echo_poll, args=(shm.name,))
        p.start()
        seq = 0
        t = time.perf_counter()
        for _ in range(N_RT):
            n = omni_errors.encode_into(DETAILS, shm.buf, 8)
            struct.pack_into("<I", shm.buf, 0, n)
            seq += 1
            struct.pack_into("<I", shm.buf, 4, seq)
            while struct.unpack_from("<I", shm.buf, 4)[0] == seq:
                pass
            seq += 1
            omni_errors.decode(shm.buf[8 : 8 + struct.unpack_from("<I", shm.buf, 0)[0]])
        rt_poll = (time.perf_counter() - t) / N_RT
        struct.pack_into("<I", shm.buf, 4, 0xFFFFFFFF)
        p.join()
    finally:
        shm.close()
        shm.unlink()
    print(
        f"error frame {len(frame)} B round trip: pipe {rt_pipe * 1e6:.1f} us, shm+pipe doorbell {rt_shm * 1e6:.1f} us, "
        f"shm spin-poll {rt_poll * 1e6:.1f} us"
    )
    print(f"4 KiB batches echoed through pipes: {tp_pipe:.0f} MB/s ({tp_pipe * 1e6 / 4096:.0f} round trips/s)")


if __name__ == "__main__":
    main()
