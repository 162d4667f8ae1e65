"""Child-process entry points for the cross-process codec tests (importable under spawn)."""

from __future__ import annotations

from multiprocessing.connection import Connection
from multiprocessing.queues import Queue
from typing import Any


def read_frame_from_shm(name: str, length: int, conn: Connection) -> None:
    """Attaches to the parent's segment, decodes the frame straight from `shm.buf`, sends the dict back."""
    from multiprocessing import resource_tracker, shared_memory

    import omni_errors

    shm = shared_memory.SharedMemory(name=name)
    # The parent owns the segment; stop this process's tracker from unlinking it at exit.
    resource_tracker.unregister(shm._name, "shared_memory")  # type: ignore[attr-defined]
    try:
        view = shm.buf[:length]
        try:
            conn.send(omni_errors.decode(view).to_dict())
        finally:
            view.release()
    finally:
        shm.close()
        conn.close()


def echo_queue(inbox: Queue[Any], outbox: Queue[Any]) -> None:
    """Receives records through a multiprocessing queue and sends them back unchanged."""
    outbox.put(inbox.get(timeout=60))


def read_message_queue(handle: Any, conn: Connection) -> None:
    """Reads one object from vLLM's shared-memory MessageQueue and reports what arrived."""
    from vllm.distributed.device_communicators.shm_broadcast import MessageQueue

    queue = MessageQueue.create_from_handle(handle, 0)
    queue.wait_until_ready()
    obj = queue.dequeue(timeout=60)
    conn.send([d.to_dict() for d in obj])
    conn.close()
