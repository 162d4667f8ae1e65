"""FastAPI/Starlette wiring: `install(app, *, raw_fallbacks=True)` registers omni_errors' handlers;
`BodyLimit` bounds request bodies (413)."""

from __future__ import annotations

from omni_errors.server.body_limit import BodyLimit, BodyTooLargeError
from omni_errors.server.register import handled_classes, install

__all__ = ["BodyLimit", "BodyTooLargeError", "handled_classes", "install"]
