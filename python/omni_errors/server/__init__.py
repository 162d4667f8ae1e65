"""FastAPI/Starlette wiring: `install(app, *, raw_fallbacks=True)` registers omni_errors' handlers;
`BodyLimit` bounds request bodies (413); `document_errors` puts the error contract in `/openapi.json`.

A vLLM API server (vLLM-Omni's, through the plugin or its own calls) gets all of these and more from
`vllm_api.install_api` (with `in_flight`, `answer_headers` and `route_errors`), and its fatal stop
from `fatal_stop.stop_on_fatal`; vLLM-Omni's `AsyncOmni` its admission gate and all-or-nothing
sleep from `admission`; a multi-node head its rejoin windows from `rejoin`."""

from __future__ import annotations

from omni_errors.server.body_limit import BodyLimit, BodyTooLargeError
from omni_errors.server.openapi import document_errors, error_responses
from omni_errors.server.register import handled_classes, install

__all__ = ["BodyLimit", "BodyTooLargeError", "document_errors", "error_responses", "handled_classes", "install"]
