"""A supervising process for lifecycle tests: runs one pipeline scenario, reports JSON lines.

Run as `python scenario.py '<json>'`. Each stdout line is one event: `started` (stage pids, shm
names), `inflight` (the first output arrived), `answered` (every request's outcome and the time it
was answered), `stopped` (every stage gone, shm removed). The process exits with the supervisor's
`exit_code` through normal interpreter shutdown, as an API server would.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from omni_errors_tools.lifecycle import LifecycleConfig, StageRequestError, StageSpec, StageStartupError, Supervisor
from omni_errors_tools.lifecycle.engine import RemoteStageSpec
from omni_errors_tools.lifecycle.remote.config import LinkConfig

# `toy` is tests/lifecycle/toy.py: this script's directory is on sys.path, and spawned stages inherit it.
_KINDS = {"ar": "toy:ARStage", "diffusion": "toy:DiffusionStage"}


def emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, "t": time.time(), **fields}), flush=True)


def _specs(stages: list[dict[str, Any]]) -> list[StageSpec | RemoteStageSpec]:
    # Engines are named by string so that only the stage processes import torch. A remote stage's
    # engine is chosen by its own process (tests/lifecycle/remote_stage.py); only kwargs go there.
    return [
        RemoteStageSpec(s["kind"], {"stage_id": i, **s.get("kwargs", {})})
        if s.get("remote")
        else StageSpec(_KINDS[s["kind"]], {"stage_id": i, **s.get("kwargs", {})}, name=s["kind"])
        for i, s in enumerate(stages)
    ]


def _link(cfg: dict[str, Any] | None) -> LinkConfig | None:
    if cfg is None:
        return None
    paths = {k: Path(cfg[k]) for k in ("secret_key",) if cfg.get(k)}
    allow = tuple(Path(p) for p in cfg.get("allow", ()))
    rest = {k: v for k, v in cfg.items() if k not in ("secret_key", "allow")}
    return LinkConfig(**rest, **paths, allow=allow)


def _stats(sup: Supervisor) -> dict[str, Any]:
    link = sup.link_stats()
    return {"counters": sup.counters(), "link": link.as_dict() if link is not None else None}


async def run(cfg: dict[str, Any]) -> int:
    sup = Supervisor(
        _specs(cfg["stages"]),
        LifecycleConfig(**cfg.get("config", {})),
        link=_link(cfg.get("link")),
        error_factory=StageRequestError,
    )
    sup.install_signal_handlers()  # as `omni-errors serve` does: every signal reaches Supervisor.handle_signal
    try:
        await sup.start()
    except StageStartupError as exc:
        d = exc.details
        emit(
            "startup_failed",
            message=str(exc),
            error_type=d.error_type,
            stage_id=d.stage_id,
            pids=sup.pids,
            status=d.status_code,
            exit_code=sup.exit_code,
            **_stats(sup),
        )
        return sup.exit_code
    callbacks: list[float] = []
    sup.add_dead_callback(lambda: callbacks.append(time.time()))  # how an API server learns to exit
    emit("started", pids=sup.pids, shm=sup.shm_names, **_stats(sup))
    results: dict[str, dict[str, Any]] = {}
    first = asyncio.Event()
    seen = 0
    action = cfg.get("action") or {}

    async def one(i: int, payload: Any) -> None:
        nonlocal seen
        rid = f"r{i}"
        n = 0
        try:
            timeout = cfg.get("timeouts", {}).get(str(i), cfg.get("timeout"))
            async for _ in sup.stream(sup.submit(payload, request_id=rid, timeout=timeout)):
                n += 1
                seen += 1
                first.set()
                if action.get("sigkill_stage") is not None and seen == action.get("after_outputs", 1):
                    os.kill(sup.pids[action["sigkill_stage"]], signal.SIGKILL)
                    emit("killed", pid=sup.pids[action["sigkill_stage"]])
            results[rid] = {"ok": True, "outputs": n, "t": time.time()}
        except StageRequestError as exc:
            d = exc.details
            results[rid] = {
                "ok": False,
                "outputs": n,
                "t": time.time(),
                "status": d.status_code,
                "stage_id": d.stage_id,
                "error_type": d.error_type,
                "fatal": d.fatal,
                "category": d.category,
                "request_id": d.request_id,
            }

    base = cfg.get("request", {"prompt": [1], "max_tokens": 8})
    special = {int(k): v for k, v in cfg.get("special", {}).items()}
    tasks = [asyncio.create_task(one(i, special.get(i, base))) for i in range(cfg.get("requests", 1))]
    waiter = asyncio.create_task(first.wait())
    await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
    emit("inflight", n=len(tasks))
    await asyncio.gather(*tasks)
    waiter.cancel()
    second = cfg.get("second_wave", 0)
    if second and sup.dead_error is None:
        await asyncio.gather(*(one(1000 + i, base) for i in range(second)))
    emit("answered", results=results, dead=sup.dead_error is not None, **_stats(sup))
    if cfg.get("wait_dead"):
        await sup.wait_dead()
    shm = sup.shm_names
    await sup.shutdown()
    left = [name for name in shm if os.path.exists(f"/dev/shm/{name}")]
    emit(
        "stopped",
        exit_code=sup.exit_code,
        health=sup.health().status_code,
        shm_left=left,
        callbacks=len(callbacks),
        **_stats(sup),
    )
    return sup.exit_code


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    cfg = json.loads(sys.argv[1])
    code = asyncio.run(run(cfg))
    sys.exit(code)


if __name__ == "__main__":
    main()
