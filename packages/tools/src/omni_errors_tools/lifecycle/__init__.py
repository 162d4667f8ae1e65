"""Fail-fast lifecycle for multi-stage, multi-process pipelines (seeds 001, 003, 004).

Importing this package does not import torch or vLLM, nor its own modules: the names below are
resolved from `_LAZY` on first use. A process that needs one small module (the vLLM-Omni plugin
reads only `exitcodes` and `failures`) does not pay for the supervisor, the links and the worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from omni_errors.lazy import lazy_names

if TYPE_CHECKING:  # resolved lazily by __getattr__ at run time; `as` marks the re-export
    from omni_errors_tools.lifecycle.engine import (
        RequestFailure as RequestFailure,
        StageEngine as StageEngine,
        StageOutput as StageOutput,
        StageSpec as StageSpec,
    )
    from omni_errors_tools.lifecycle.supervisor import Supervisor as Supervisor
    from omni_errors_tools.lifecycle.supervisor_types import (
        DuplicateRequestError as DuplicateRequestError,
        Health as Health,
        LifecycleConfig as LifecycleConfig,
        StageRequestError as StageRequestError,
        StageResult as StageResult,
        StageStartupError as StageStartupError,
    )

_LAZY = {
    "DuplicateRequestError": "omni_errors_tools.lifecycle.supervisor_types",
    "Health": "omni_errors_tools.lifecycle.supervisor_types",
    "LifecycleConfig": "omni_errors_tools.lifecycle.supervisor_types",
    "RequestFailure": "omni_errors_tools.lifecycle.engine",
    "StageEngine": "omni_errors_tools.lifecycle.engine",
    "StageOutput": "omni_errors_tools.lifecycle.engine",
    "StageRequestError": "omni_errors_tools.lifecycle.supervisor_types",
    "StageResult": "omni_errors_tools.lifecycle.supervisor_types",
    "StageSpec": "omni_errors_tools.lifecycle.engine",
    "StageStartupError": "omni_errors_tools.lifecycle.supervisor_types",
    "Supervisor": "omni_errors_tools.lifecycle.supervisor",
}

__all__ = sorted(_LAZY)


__getattr__, __dir__ = lazy_names(__name__, _LAZY)
