"""A remote stage process for lifecycle tests: a toy engine behind the real ZMQ link.

Run as `python remote_stage.py '<json>'` with `stage_id`, `kind` ("ar" or "diffusion") and
`connect` (`StageConnectConfig` fields). It imports torch (the toy engines) and never vLLM, as a
real remote stage host would not, and exits with `run_remote_stage`'s code.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

from omni_errors_tools.lifecycle.remote.config import StageConnectConfig
from omni_errors_tools.lifecycle.remote.stage_side import run_remote_stage

# `toy` is tests/lifecycle/toy.py, next to this script (its directory is on sys.path).
_KINDS = {"ar": "toy:ARStage", "diffusion": "toy:DiffusionStage"}


def main() -> None:
    cfg = json.loads(sys.argv[1])
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s remote %(levelname)s %(name)s: %(message)s"
    )
    connect = dict(cfg["connect"])
    for key in ("secret_key", "server_key"):
        if connect.get(key):
            connect[key] = Path(connect[key])
    code = run_remote_stage(cfg["stage_id"], cfg["kind"], _KINDS[cfg["kind"]], StageConnectConfig(**connect))
    sys.exit(code)


if __name__ == "__main__":
    main()
