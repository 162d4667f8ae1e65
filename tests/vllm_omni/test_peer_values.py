"""A peer's values are parsed once, at the edge, and a bad one never fails the error path.

A diffusion proc's error frame names the exit code its fatal failure implies (`omni_error_exit`).
A frame from a newer release (a code this one does not know) or a malformed one (a bool, a string,
a huge int) must still end the pipeline with its record and the documented default (80), logged
once. Through the real path, in a fresh interpreter with the plugin registered: the real
`OmniMsgpackEncoder` writes the frame, the patched client decoder reads it, and the patched
`Orchestrator._handle_stage_error` answers the request and ends the pipeline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from omni_errors.fatal.exitcodes import ExitCode

_PROBE = r"""
import asyncio, json, logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(message)s")
import janus
import omni_errors
import omni_errors_vllm_omni as plugin
plugin.register()
from omni_errors.semantics.core_table import fatal_record
from omni_errors.fatal import process as fatal
from vllm_omni.diffusion.stage_diffusion_client import OmniMsgpackDecoder
from vllm_omni.distributed.omni_connectors.utils.serialization import OmniMsgpackEncoder
from vllm_omni.engine.orchestrator import Orchestrator
from vllm_omni.engine.stage_pool import StagePool

async def one(value):
    fatal.reset()
    requests, outputs, rpcs = (janus.Queue().async_q for _ in range(3))
    orchestrator = Orchestrator(requests, outputs, rpcs, [StagePool(0, [])])
    frame = {"type": "error", "request_id": "req-1", "error": "boom", "status_code": 500,
             "error_type": "InternalServerError", "omni_error": omni_errors.encode(fatal_record(stage_id=0)),
             "omni_error_exit": value}
    message = OmniMsgpackDecoder().decode(OmniMsgpackEncoder().encode(frame))
    await orchestrator._handle_stage_error(0, message["output"])
    answer = outputs.get_nowait()
    return {"status": answer.details.status_code, "fatal": answer.details.fatal,
            "request_id": answer.details.request_id, "exit": fatal.exit_code(),
            "stops": type(requests.get_nowait()).__name__}

async def main():
    return {name: await one(value) for name, value in json.loads(sys.argv[1]).items()}

print(json.dumps(asyncio.run(main())))
"""

#: name -> what the frame says: codes this release does not know, and values that are not codes at all.
# A code of the documented range that no release of this one documents (a newer release's).
UNKNOWN = next(code for code in range(80, 128) if code not in set(ExitCode))
BAD = {"unknown": UNKNOWN, "bool": True, "string": "81", "huge": 2**64 - 1, "negative": -1}


def test_a_bad_exit_code_from_a_peer_is_ignored_and_the_pipeline_still_ends_with_its_record() -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps({**BAD, "oom": int(ExitCode.OOM)})],
        env={**os.environ, "VLLM_TARGET_DEVICE": "cpu", "OMNI_ERRORS_VLLM_OMNI": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    answered = {"status": 500, "fatal": True, "request_id": "req-1", "stops": "ShutdownRequestMessage"}
    for name in BAD:
        assert report[name] == {**answered, "exit": ExitCode.FATAL_ENGINE}, name
    assert report["oom"] == {**answered, "exit": ExitCode.OOM}  # a documented code is kept
    # vLLM configures the `vllm` logger in the process, the plugin's included (its handler writes to stdout).
    ignored = [line for line in (done.stdout + done.stderr).splitlines() if "ignored an exit code" in line]
    assert len(ignored) == 1, ignored  # said once per process, however many peers send one
