"""The series against the plugin, the stage clients and procs (`omni_errors_vllm_omni.client`,
`.hooks`): sends a stage does not take, the client's shutdown, the proc's error frames and the
client's reading of them; the release with the plugin and the series' tree without it give the
same (`upstream_probe`).
"""

from __future__ import annotations

import signal
from typing import Any

import pytest
from upstream_probe import CLIENT_RECORD, FATAL_RECORD, SERVER_RECORD, probe_report

_SEND_TARGETS = ("add_request_async", "collective_rpc_async", "abort_requests_async")


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_send_the_stage_does_not_take_is_the_plugins(tree: str, request: pytest.FixtureRequest) -> None:
    """Seed 001's hang in a send, on a real client whose request socket has no peer (nothing ever takes
    a message): the release with the plugin's wraps and the patched tree with nothing patched there set
    the same deadline, raise the same `EngineDeadError` once it passes, mark the stage dead, and drop
    an abort with a warning; a remote replica's client (no process manager, TCP links) gets the core's
    `RemoteReplica`, alive, its two links watched with heartbeats (the plugin's `_connect_transport` wrap
    on the release, vLLM-Omni's own on the series: patch 25). With the plugin switched off, vLLM-Omni's
    own sets the deadline on the series only (the release's sends block: seed 001)."""
    report = probe_report(tree, request)
    sends = dict(report["sends"])
    assert sends.pop("patched") == (sorted(["_connect_transport", *_SEND_TARGETS]) if tree == "release" else [])
    assert sends.pop("remote") == {
        "manager": "omni_errors.link_watch.RemoteReplica",
        "alive": True,
        "heartbeat_ms": [400, 400],
        "watched": True,
    }
    waited = {name: sends[name].pop("s") for name in ("request", "control", "abort")}
    assert all(0.9 < s < 10 for s in waited.values()), waited  # the 1 s deadline: neither at once nor a hang
    warnings = sends.pop("warnings")
    assert len(warnings) == 1 and "is gone; abort of 1 request(s) dropped" in warnings[0], warnings
    own = sends.pop("own_transport")
    assert own == {
        "patched": False,
        "sndtimeo_ms": 1000 if tree == "series" else -1,
        "linger_ms": 0 if tree == "series" else -1,
    }
    dead = "EngineCore encountered an issue. See stack trace (above) for the root cause."
    assert sends == {
        "sndtimeo_ms": 1000,
        "linger_ms": 0,
        "request": {
            "outcome": ["EngineDeadError", dead, "Stage-2 did not take a request within 1000 ms", True],
            "dead": True,
        },
        "control": {
            "outcome": ["EngineDeadError", dead, "Stage-2 did not take a control message within 1000 ms", True],
            "dead": True,
        },
        "abort": {"outcome": ["returned", None], "dead": True},
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_stage_clients_shutdown_does_not_block_and_carries_an_oom_exit(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """Seed 001's stop of a hung stage and seed 003's exit code at the server, on a real client whose
    request socket takes nothing (a blocking send would never return) and a real proc: the release with
    the plugin's replacement and the patched tree with nothing patched there stop it the same way. A
    proc that ignores SIGTERM is killed after 0.5 s (was 10 s); one that ends 81, before the stop or on
    it, notes 81 in the server's fatal state; one that ends on the signal notes nothing."""
    report = probe_report(tree, request)
    shutdown = dict(report["shutdown"])
    assert shutdown.pop("patched") is (tree == "release")
    stopped = {"returned": True, "closed": [True, True, True]}
    assert shutdown == {
        "ignore": {**stopped, "timeouts": [0.5], "exitcode": -signal.SIGKILL, "noted": None},
        "oom": {**stopped, "timeouts": [0.5], "exitcode": 81, "noted": 81},
        "gone": {**stopped, "timeouts": [], "exitcode": 81, "noted": 81},
        "default": {**stopped, "timeouts": [0.5], "exitcode": -signal.SIGTERM, "noted": None},
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_procs_error_frames_carry_the_record_they_answer(tree: str, request: pytest.FixtureRequest) -> None:
    """The stage-to-client hop of a subprocess stage: a real `run_loop` whose request handler and
    collective RPC fail, then one whose executor is dead, their frames read back with vLLM-Omni's own
    decoder. The release with the plugin's encoder and death notice and the patched tree with nothing
    patched there send the same frames: the record (a request's with its id), the sanitized flat fields
    from it, and on a fatal one the exit code that wins in the proc (81 after an OOM, for a dead engine
    too); a dead executor's proc sends the record it dies of (exit 80) before its sentinel."""
    report = probe_report(tree, request)
    frames = dict(report["frames"])
    patched = ["OmniMsgpackEncoder", "_signal_fatal_engine_failure"]
    assert frames.pop("patched") == (patched if tree == "release" else [])
    closed = {**SERVER_RECORD, "message": "DiffusionExecutor is closed"}

    def frame(
        details: dict[str, Any], answers: str | None, exit_code: int | None, *, of_request: bool
    ) -> dict[str, Any]:
        flat = [details["message"], details["status_code"], details["error_type"]]
        record = {**details, "request_id": answers if of_request else None}
        return {"for": answers, "flat": flat, "record": record, "exit": exit_code}

    assert frames == {
        "executor_dead=False": {"stopped": True, "noted": 81},
        "failed": [
            frame(CLIENT_RECORD, "client", None, of_request=True),
            frame(SERVER_RECORD, "server", None, of_request=True),
            frame(FATAL_RECORD, "oom", 81, of_request=True),
            frame(SERVER_RECORD, "server", None, of_request=False),
            frame(FATAL_RECORD, "dead", 81, of_request=False),
        ],
        "executor_dead=True": {"stopped": True, "noted": 80, "raised": "RuntimeError"},
        "executor_died": [
            frame(closed, "closed", None, of_request=True),
            frame(FATAL_RECORD, None, 80, of_request=False),
            "DIFFUSION_PROC_DEAD",
        ],
    }


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_stage_client_reads_the_record_of_each_error_frame(tree: str, request: pytest.FixtureRequest) -> None:
    """The client's side of the stage-to-client hop: a real client's response socket fed the frames a
    proc with omni-errors sends, one from a peer without it, the death notice and the sentinel. The
    release with the plugin's decoder and the patched tree with nothing patched there drain them alike:
    each request's error output with its record (the flat fields from it), the peer's from its flat
    fields, the RPC's failure with its sanitized reason, the OOM's 81 noted in the server's fatal
    state, the stage dead, and the death notice's record (80) as what the replica died of."""
    report = probe_report(tree, request)
    drain = dict(report["drain"])
    assert drain.pop("patched") is (tree == "release")
    assert drain == {
        "outputs": [
            {
                "for": "client",
                "flat": [CLIENT_RECORD["message"], 400, "BadRequestError"],
                "record": [{**CLIENT_RECORD, "request_id": "client"}, None],
                "metrics": {"e2e_ms": 5},
            },
            {
                "for": "oom",
                "flat": [FATAL_RECORD["message"], 500, "InternalServerError"],
                "record": [{**FATAL_RECORD, "request_id": "oom"}, 81],
                "metrics": {},
            },
            {"for": "peer", "flat": ["worker gone", 500, "InternalServerError"], "record": None, "metrics": {}},
        ],
        "rpc_results": {"ping": {"error": True, "reason": "could not read <path>"}},
        "dead": True,
        "noted": 81,
        "died_of": [FATAL_RECORD, 80],
    }
