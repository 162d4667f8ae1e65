"""`FakeExecutor`: vLLM-Omni's `DiffusionExecutor` interface on CPU, under the real `DiffusionEngine`.

It behaves as `MultiprocDiffusionExecutor` does with one worker: a worker-side failure comes back
as that request's `DiffusionOutput.from_exception(exc)`. A lost worker is reported first: the
executor's worker monitor marks it dead and fires the failure callbacks (`check_health` raises
`EngineDeadError` from then on); the call in flight notices only at its next poll of the result
queue (`_NOTICE_S` here, up to 5 s there) and raises `EngineDeadError`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch
from vllm.v1.engine.exceptions import EngineDeadError
from vllm_omni.diffusion.data import DiffusionOutput, OmniACK, OmniDiffusionConfig
from vllm_omni.diffusion.diffusion_engine import DiffusionEngine
from vllm_omni.diffusion.executor.abstract import DiffusionExecutor
from vllm_omni.diffusion.worker.utils import BatchRunnerOutput, RunnerOutput

from omni_errors_fake_diffusion.faults import control_fails, fault_of, mark, raise_fault

__all__ = ["FakeExecutor", "install"]

#: How long after its worker is lost the call in flight notices: `MultiprocDiffusionExecutor` polls
#: its result queue in 5 s chunks, and its worker monitor has reported the loss by then.
_NOTICE_S = 0.5

#: The worker RPCs of `AsyncOmni.sleep`/`wake_up`, and the name a test uses to make one fail.
_CONTROL_TASKS = {"handle_sleep_task": "sleep", "handle_wake_task": "wake"}


class FakeExecutor(DiffusionExecutor):
    """One CPU "worker" producing a 16x16 image (a tensor in [-1, 1], as a VAE decode returns)."""

    def _init_executor(self) -> None:
        self._closed = False
        self._failed = False
        self._callbacks: list[Callable[[], None]] = []

    @property
    def is_dead(self) -> bool:
        return self._closed or self._failed

    def _lose_worker(self) -> None:
        self._failed = True
        for callback in self._callbacks:
            callback()

    def execute_request(self, scheduler_output: Any) -> BatchRunnerOutput:
        if self.is_dead:
            raise EngineDeadError()
        outputs = []
        for new_req in scheduler_output.scheduled_new_reqs:
            fault = fault_of(new_req.req.prompt)
            if fault == "fatal":
                mark(fault)
                self._lose_worker()  # the worker monitor's report
                time.sleep(_NOTICE_S)
                raise EngineDeadError()
            try:
                if fault is not None:
                    raise_fault(fault)
                result = DiffusionOutput(output=torch.zeros(1, 3, 16, 16))
            except Exception as exc:  # the worker catches and reports, as diffusion_worker.py does
                result = DiffusionOutput.from_exception(exc)
            outputs.append(RunnerOutput(request_id=new_req.request_id, step_index=None, finished=True, result=result))
        return BatchRunnerOutput.from_list(outputs)

    execute_batch = execute_request
    execute_step = execute_request

    def collective_rpc(
        self,
        method: str,
        timeout: float | None = None,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        unique_reply_rank: int | None = None,
        exec_all_ranks: bool = False,
    ) -> Any:
        if self.is_dead:
            raise EngineDeadError()
        result = self._control_ack(method, args[0]) if method in _CONTROL_TASKS and args else None
        return result if unique_reply_rank is not None else [result]

    def _control_ack(self, method: str, task: Any) -> OmniACK:
        """What a real rank-0 worker's `handle_sleep_task`/`handle_wake_task` answers (nothing to free on
        CPU), or its error ack when the test asked this control call to fail (`control_fails`)."""
        task_id = task["task_id"] if isinstance(task, dict) else task.task_id
        if control_fails(_CONTROL_TASKS[method]):
            return OmniACK(task_id=task_id, status="ERROR", error_msg=f"{_CONTROL_TASKS[method]} failed on the worker")
        return OmniACK(task_id=task_id, status="SUCCESS", stage_id=getattr(self.od_config, "stage_id", 0), rank=0)

    def check_health(self) -> None:
        if self._failed:
            raise EngineDeadError()

    def register_failure_callback(self, callback: Callable[[], None]) -> None:
        self._callbacks.append(callback)

    def shutdown(self) -> None:
        self._closed = True


def install() -> None:
    """Patch `make_engine`/`enrich_config`, and force the subprocess client when asked to."""
    import os

    make_engine = DiffusionEngine.make_engine

    def fake_make_engine(config: OmniDiffusionConfig, scheduler: Any = None) -> DiffusionEngine:
        config.distributed_executor_backend = FakeExecutor
        return make_engine(config, scheduler)

    DiffusionEngine.make_engine = staticmethod(fake_make_engine)  # type: ignore[method-assign]
    OmniDiffusionConfig.enrich_config = lambda self: None  # type: ignore[method-assign]
    if os.environ.get("OMNI_FAKE_DIFFUSION_MODE") == "subprocess":
        from vllm_omni.diffusion import stage_diffusion_client

        create = stage_diffusion_client.create_diffusion_client

        def subprocess_client(*args: Any, **kwargs: Any) -> Any:
            kwargs["use_inline"] = False
            if len(args) > 4:
                args = args[:4]
            return create(*args, **kwargs)

        stage_diffusion_client.create_diffusion_client = subprocess_client
