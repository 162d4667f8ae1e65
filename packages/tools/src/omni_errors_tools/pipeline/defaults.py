"""Defaults that `omni-errors serve --help` shows, kept apart so that the command line states them
without importing the API layer (vLLM, FastAPI) first."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_BODY_BYTES", "DEFAULT_MODEL"]

#: `--model`: the model name the reference pipeline serves (and requests name).
DEFAULT_MODEL = "omni-tiny"

#: `--max-body-bytes`: room for a full-size input audio (8 MiB of WAV, `audio.MAX_AUDIO_BYTES`, is
#: 11.2 MB in base64) and the rest of the request.
DEFAULT_MAX_BODY_BYTES = 16 << 20
