"""The series against the plugin, the API process (`omni_errors_vllm_omni.api`, `.admission`): the
video job's stored record, the abort after a fatal failure, the HTTP boundary over a real uvicorn
server, admission while paused or asleep; the release with the plugin and the series' tree
without it give the same (`upstream_probe`).
"""

from __future__ import annotations

import pytest
from omni_errors.render.http import RETRY_AFTER_S
from upstream_probe import FATAL_RECORD, SERVER_RECORD, probe_report


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_failed_video_job_stores_its_record(tree: str, request: pytest.FixtureRequest) -> None:
    """Behaviour 5: what a failed async video job stores, for its GET. The release with the plugin's
    replacement and the patched tree's own `_video_error_from_exception` store the same."""
    report = probe_report(tree, request)
    assert report["video"] == {"patched": tree == "release", "stored": [500, "could not read <path>"]}


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_failed_video_job_reads_back_as_every_job_does(tree: str, request: pytest.FixtureRequest) -> None:
    """docs/errors.md's rule for async jobs, through vLLM-Omni's own routes: the release with the
    plugin's two route wraps and the patched tree with nothing patched there answer the metadata of
    a failed job 200 with its whole record, its content with the stored status and envelope, and
    declare the metadata's 200 as `VideoResponse`, whose `VideoError` has the record's fields."""
    report = probe_report(tree, request)
    read_back = report["video_read_back"]
    assert read_back["patched"] == [tree == "release"] * 2
    message = "No final video output stage found"
    record = {"code": 503, "message": message, "type": "ServiceUnavailableError", "param": None, "stage_id": 0}
    assert read_back["metadata"] == [200, "failed", {**record, "request_id": None}]
    assert read_back["content"] == [
        503,
        str(RETRY_AFTER_S),
        {"error": {"message": message, "type": "ServiceUnavailableError", "param": None, "code": 503, "stage_id": 0}},
    ]
    assert read_back["declared"] == {"$ref": "#/components/schemas/VideoResponse"}
    assert read_back["error_fields"] == ["code", "message", "param", "request_id", "stage_id", "type"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_after_a_fatal_failure_a_request_is_not_aborted_through_the_pipeline(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """A failed request's abort: the release with the plugin's wrap and the patched tree with nothing
    patched there send it to the Orchestrator while nothing is fatal, and return at once, sending
    nothing, once the API process's fatal state holds a fatal failure (the ended pipeline would
    leave the answer waiting the whole abort timeout)."""
    report = probe_report(tree, request)
    abort = dict(report["abort"])
    assert abort.pop("patched") is (tree == "release")
    timeout = abort.pop("timeout")
    assert abort == {
        "nothing_fatal": {"returned": None, "asked": [[["r1-0a1b"], timeout]]},
        "fatal": {"returned": None, "asked": []},
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_api_boundary_is_the_cores_on_both_trees(tree: str, request: pytest.FixtureRequest) -> None:
    """Behaviour 1 and seed 003 at the API server: the release with the plugin's three wraps, and the
    patched tree with nothing patched there, answer a malformed body 400, a server failure with its
    sanitized record, a caught fatal failure with the fatal record; declare the error contract; and
    the fatal record stops the server, whose `serve_http` then exits 80."""
    report = probe_report(tree, request)
    assert report["boundary"] == {
        "patched": [tree == "release"] * 3,
        "answers": [
            [400, "BadRequestError"],
            [500, "InternalServerError", SERVER_RECORD["message"]],
            [500, "InternalServerError", FATAL_RECORD["message"]],
        ],
        "declared": [200, 400, 413, 422, 500, 501, 503],
        "exit": 80,
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_admission_is_the_cores_on_both_trees(tree: str, request: pytest.FixtureRequest) -> None:
    """Patches 23 and 24: the release with the plugin's wraps and the patched tree with nothing
    patched there build the same gate; a request to a paused, then a sleeping engine gets the same
    503 with `Retry-After`, and `/health` the same 200 body naming the state; a sleep of no stage
    and of an unknown one leave admission open (vLLM-Omni's own left it closed for ever), and a
    wake-up after a level-2 sleep is the same 501 naming the stage."""
    report = probe_report(tree, request)
    admission = dict(report["admission"])
    assert admission.pop("patched") == [tree == "release"] * 4
    assert admission.pop("gate") is True
    refused = {
        **FATAL_RECORD,
        "category": "server",
        "status_code": 503,
        "error_type": "ServiceUnavailableError",
        "fatal": False,
    }
    paused = "Generation is paused: it resumes after resume_generation (POST /resume)"
    asleep = 'Stage 1 is asleep: wake it with POST /v1/omni/wakeup {"stage_ids": [1]}'
    assert admission.pop("states") == {
        "open": ["submitted", [200, {"status": "healthy"}]],
        "paused": [
            ["OmniServerError", {**refused, "message": paused, "stage_id": 0}, RETRY_AFTER_S],
            [200, {"status": "paused", "is_sleeping": False, "is_paused": True, "stage_id": 0, "message": paused}],
        ],
        "asleep": [
            ["OmniServerError", {**refused, "message": asleep, "stage_id": 1}, RETRY_AFTER_S],
            [200, {"status": "sleeping", "is_sleeping": True, "is_paused": True, "stage_id": 1, "message": asleep}],
        ],
    }
    assert admission.pop("transitions") == {
        "no_stage": [],
        "unknown_stage": "Invalid stage_ids [5]; valid range is 0..1",
        "admission_after": [False, False, "submitted"],
        "level_2_wake_up": {
            **refused,
            "status_code": 501,
            "error_type": "NotImplementedError",
            "stage_id": 1,
            "message": "Stage 1 slept at level 2 (its weights were discarded) and vLLM-Omni cannot wake it: "
            "restart the server",
        },
    }
