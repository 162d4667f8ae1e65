"""The series against the plugin, the diffusion stage (`omni_errors_vllm_omni.diffusion`): its worker's
failed output, the engine's answer and fatal stop, the in-process executor, the inline client's
error output, the models object; the release with the plugin and the series' tree without it
give the same (`upstream_probe`).
"""

from __future__ import annotations

import pytest
from upstream_probe import CLIENT_RECORD, FATAL_RECORD, SERVER_RECORD, probe_report


@pytest.mark.parametrize("tree", ["release", "series"])
def test_inline_executor_answers_an_oom_with_its_record(tree: str, request: pytest.FixtureRequest) -> None:
    """Seed 003 in vLLM-Omni's own in-process executor: the release with the plugin's wrap, and the
    patched tree with nothing patched there, give the engine the same output (OOM by type: 81)."""
    report = probe_report(tree, request)
    assert report["executor"] == {"collective_rpc_patched": tree == "release", "record": [500, True, 81]}


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_model_the_server_does_not_serve_is_vllms_404(tree: str, request: pytest.FixtureRequest) -> None:
    """vLLM's `_check_model` on the diffusion server's models object: the release with the plugin's
    wrap, and the patched tree with nothing patched there, both answer vLLM's 404 naming the model."""
    report = probe_report(tree, request)
    assert report["models"] == {"getattr_patched": tree == "release", "answer": [404, "NotFoundError", "model"]}


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_failed_diffusion_output_carries_its_record_and_the_engine_raises_it(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """Seed 003 from the worker to the engine: `DiffusionOutput.from_exception` and the engine's
    `postprocess_output`, the release with the plugin's wraps and the patched tree with nothing patched
    there: the same record on the output (an OOM fatal by type, exit 81, noted in the fatal state),
    the same sanitized flat fields, the same exception raised from it; an aborted output and one
    without a record (a peer without omni-errors) answered as vLLM-Omni answers them."""
    report = probe_report(tree, request)
    diffusion = dict(report["diffusion"])
    assert diffusion.pop("patched") == (["from_exception", "postprocess_output"] if tree == "release" else [])
    oom, client, server = FATAL_RECORD, CLIENT_RECORD, SERVER_RECORD
    assert diffusion == {
        "noted": [None, 81],
        "outputs": {
            "oom": {
                "flat": [oom["message"], 500, "InternalServerError"],
                "record": [oom, 81],
                "raised": ["OmniEngineDeadError", {**oom, "request_id": "r-oom"}],
            },
            "client": {
                "flat": [client["message"], 400, "BadRequestError"],
                "record": [client, None],
                "raised": ["OmniClientError", {**client, "request_id": "r-client"}],
            },
            "server": {
                "flat": [server["message"], 500, "InternalServerError"],
                "record": [server, None],
                "raised": ["OmniServerError", {**server, "request_id": "r-server"}],
            },
        },
        "aborted": ["DiffusionRequestAbortedError", "aborted by the client"],
        "no_record": ["RuntimeError", "worker gone"],
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_fatal_record_stops_the_diffusion_engine_and_the_proc_exits_with_its_code(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """Seed 003 in the stage process: a worker's OOM record delivered by `_emit_outputs` (both execution
    modes) fails the engine once, with the rebuilt record, and notes 81 in the stage process's fatal
    state; a client error fails nothing. `StageDiffusionProc.close` releases the engine and executor,
    then ends the proc with the fatal state's code (80, 81, 86), or returns when nothing fatal
    happened. The release with the plugin's wraps and the patched tree with nothing patched there agree."""
    report = probe_report(tree, request)
    stop = dict(report["fatal_stop"])
    assert stop.pop("patched") == (["_emit_outputs", "close"] if tree == "release" else [])
    fatal = FATAL_RECORD
    failed = ["failed", "OmniEngineDeadError", fatal]
    put = [["put", "r1", None], ["put", "r2", fatal["message"]], ["put", "r3", "height must be a multiple of 16"]]
    released = ["engine", "executor"]
    assert stop == {
        "engine": {
            "request_batch": {
                "oom": {"calls": [["emitted", ["r1", "r2", "r3"]], failed], "noted": 81},
                "client": {"calls": [["emitted", ["r1", "r3"]]], "noted": None},
            },
            "step_batch": {
                "oom": {"calls": [*put, failed], "noted": 81},
                "client": {"calls": [put[0], put[2]], "noted": None},
            },
        },
        "proc": {
            "none": {"exits": [None, None], "released": released},
            "80": {"exits": [80, 80], "released": released},
            "81": {"exits": [81, 81], "released": released},
            "86": {"exits": [86, 86], "released": released},
        },
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_inline_clients_error_output_carries_the_record_it_answers(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """The inline diffusion client answering a failed request: `OmniRequestOutput.from_error`, built inside
    the `except` that caught the failure, carries that failure's record (the release with the plugin's
    wrap reads the exception being handled; the patched tree's own `from_error` is handed it), its flat
    fields from the record, an OOM's 81 noted in the fatal state; built outside an `except`, no record."""
    report = probe_report(tree, request)
    answers = dict(report["error_output"])
    assert answers.pop("patched") is (tree == "release")
    record, client, server = (
        {**details, "request_id": "r1"} for details in (FATAL_RECORD, CLIENT_RECORD, SERVER_RECORD)
    )
    assert answers == {
        "oom": {
            "flat": ["r1", True, record["message"], 500, "InternalServerError"],
            "record": [record, 81],
            "noted": 81,
        },
        "client": {
            "flat": ["r1", True, client["message"], 400, "BadRequestError"],
            "record": [client, None],
            "noted": None,
        },
        "server": {
            "flat": ["r1", True, server["message"], 500, "InternalServerError"],
            "record": [server, None],
            "noted": None,
        },
        "outside_an_except": True,
    }
