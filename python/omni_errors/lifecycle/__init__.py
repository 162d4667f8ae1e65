"""Fail-fast lifecycle for multi-stage, multi-process pipelines (seeds 001, 003, 004).

Importing this package does not import torch or vLLM.
"""

from __future__ import annotations

from omni_errors.lifecycle.engine import RequestFailure, StageEngine, StageOutput, StageSpec
from omni_errors.lifecycle.exitcodes import ExitCode
from omni_errors.lifecycle.supervisor import Supervisor
from omni_errors.lifecycle.supervisor_types import (
    DuplicateRequestError,
    Health,
    LifecycleConfig,
    StageRequestError,
    StageResult,
    StageStartupError,
)

__all__ = [
    "DuplicateRequestError",
    "ExitCode",
    "Health",
    "LifecycleConfig",
    "RequestFailure",
    "StageEngine",
    "StageOutput",
    "StageRequestError",
    "StageResult",
    "StageSpec",
    "StageStartupError",
    "Supervisor",
]
