"""FastAPI/Starlette wiring: `install(app, *, raw_fallbacks=True)` registers omni_errors' handlers."""

from __future__ import annotations

from omni_errors.server.register import handled_classes, install

__all__ = ["handled_classes", "install"]
