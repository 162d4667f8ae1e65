"""The series against the plugin, the orchestrator and the multi-node head
(`omni_errors_vllm_omni.orchestrator`, `.distributed`): error messages carrying records, the head's
waits, a stage's rejoin window, stage errors and dead replicas, the membership controller, the
headless launcher; the release with the plugin and the series' tree without it give the same
(`upstream_probe`).
"""

from __future__ import annotations

import pytest
from omni_errors.render.http import RETRY_AFTER_S
from upstream_probe import HEAD_TARGETS, MESSAGE_MODULES, probe_report


@pytest.mark.parametrize("tree", ["release", "series"])
def test_an_error_message_carries_the_record_the_plugin_gave_it(tree: str, request: pytest.FixtureRequest) -> None:
    """The orchestrator's and the membership controller's `ErrorMessage` built from flat fields: the
    release with the plugin's record-carrying subclass and the patched tree's own `details` give the
    same records, and `_raise_nonfatal_error_message` raises the same errors from them."""
    report = probe_report(tree, request)
    messages = report["messages"]
    assert {f"{module}:ErrorMessage" for module in MESSAGE_MODULES} & set(report["patched"]) == (
        {f"{module}:ErrorMessage" for module in MESSAGE_MODULES} if tree == "release" else set()
    )
    client, fatal, lost = (messages["details"][name] for name in ("client", "fatal", "lost"))
    assert client == {
        "message": "prompt refused: <path>",
        "category": "client",
        "status_code": 422,
        "error_type": "UnprocessableEntityError",
        "parameter": None,
        "request_id": "r1",
        "stage_id": 0,
        "fatal": False,
    }
    assert fatal["fatal"] and fatal["stage_id"] == 1 and "/home/" not in fatal["message"]
    assert (lost["status_code"], lost["request_id"], lost["stage_id"]) == (500, "r2", 0)
    assert messages["raised"]["client"] == ["OmniClientError", client]
    assert messages["raised"]["lost"] == ["OmniServerError", lost]
    if tree == "series":  # the same, byte for byte, as with the plugin
        assert messages == request.getfixturevalue("on_the_release")["messages"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_heads_waits_are_the_plugins(tree: str, request: pytest.FixtureRequest) -> None:
    """A multi-node head's registration poll, a stage's heartbeat and the membership watcher's stop:
    the release with the plugin's patches and the patched tree with nothing patched there agree."""
    report = probe_report(tree, request)
    assert set(HEAD_TARGETS) & set(report["patched"]) == (set(HEAD_TARGETS) if tree == "release" else set())
    assert report["head"] == {
        "poll_ms": 100,
        "heartbeat_s": 1.0,
        "shared_shutdown_event": True,
    }


_OUTAGE_TARGETS = (
    "vllm_omni.engine.stage_pool:StagePool.pick",
    "vllm_omni.engine.orchestrator:OrchestratorBase._fail_request_dead_stage",
    "vllm_omni.entrypoints.async_omni:AsyncOmni.generate",
)


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_stage_in_its_rejoin_window_refuses_at_once_on_both_trees(tree: str, request: pytest.FixtureRequest) -> None:
    """On a multi-node head with a stage's rejoin window open: its pool's `pick` refuses at once, a
    request that finds no live replica gets the 503 record (a one-host pool's still the fatal one), and
    `generate` refuses a new request with 503 and `Retry-After`; after a fatal failure, `generate`
    answers the fatal record at once. The plugin's patches on the release, vLLM-Omni's own calls on the
    series (patches 28 and 29): the same answers."""
    report = probe_report(tree, request)
    assert set(_OUTAGE_TARGETS) & set(report["patched"]) == (set(_OUTAGE_TARGETS) if tree == "release" else set())
    outage = report["outage"]
    assert outage["pick"] == ["StageUnavailableError", "stage 6 has no live replica (rejoin window)"]
    assert outage["dead stage, head"] == [503, "ServiceUnavailableError", False, 6, "r6", ["r6"]]
    one_host = outage["dead stage, one host's pool"]
    assert one_host[0] >= 500 and one_host[2:] == [True, 6, "r6", ["r6"]]  # fatal, as on one host before
    assert outage["generate, outage"][1:] == [503, False, RETRY_AFTER_S]
    assert outage["generate, after a fatal failure"][1:] == [500, True, None]
    if tree == "series":
        assert outage == request.getfixturevalue("on_the_release")["outage"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_stage_error_answers_its_record_and_a_fatal_one_ends_the_pipeline_on_both_trees(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """`_handle_stage_error`: a CFG companion's client error answers its parent with the stage's record
    (400, `parameter`), and the pipeline serves on; an OOM on one host answers every request in flight
    with the fatal record, stops the orchestrator through its own shutdown message and makes 81 the
    exit code (the same OOM from a remote replica: `_handle_dead_replica`'s test). The plugin's
    replacement on the release, vLLM-Omni's own on the series (patches 30, 32, 33): the same answers."""
    report = probe_report(tree, request)
    key = "vllm_omni.engine.orchestrator:OrchestratorBase._handle_stage_error"
    assert (key in report["patched"]) is (tree == "release")
    stage_error = report["stage_error"]
    assert stage_error["client error, CFG companion"] == {
        "answers": [["r1", 400, "BadRequestError", "height", False]],
        "cleaned": [[["r1", "r1-cfg"], True]],
        "stops": [],
        "exit": None,
    }
    fatal = [500, "InternalServerError", None, True]
    assert stage_error["oom, one host"] == {
        "answers": [["r1", *fatal], ["r2", *fatal]],  # its own answer, then every other one in flight
        "cleaned": [[["r1", "r1-cfg"], True], [["r2"], False]],
        "stops": ["ShutdownRequestMessage"],
        "exit": 81,
    }
    if tree == "series":
        assert stage_error == request.getfixturevalue("on_the_release")["stage_error"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_dead_replica_ends_the_pipeline_or_waits_for_its_stages_window_on_both_trees(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """`_handle_dead_replica`: a replica that dies while another serves fails only its own requests, as a
    lost replica's (503, not fatal: a fatal answer would end the server); the last one ends the
    pipeline (every request in flight answered, the orchestrator's own shutdown) with what it said it
    died of (81), 85 when it vanished without a word, 80 for an inline stage whose
    executor was lost; a remote replica is detached through the membership controller, its requests
    answered as lost (not fatal), and its stage's window opened: the pipeline ends only when the window
    passes, with 86; a remote replica that sends the OOM it dies of is lost at once, its stage's window
    keeping 81. The plugin's wrap on the release, vLLM-Omni's own on the series (patches 31 to 33)."""
    report = probe_report(tree, request)
    key = "vllm_omni.engine.orchestrator:OrchestratorBase._handle_dead_replica"
    assert (key in report["patched"]) is (tree == "release")
    dead = report["dead_replica"]
    local = {"unregistered": [], "window": None}
    assert dead["oom, another replica serves on"] == {
        **local,
        "answers": [["r1", 503, False]],  # r2 is bound to the live replica
        "cleaned": ["r1"],
        "stops": [],
        "exit": None,
    }
    ended = {  # the stage's requests answered as fatal, then r3, in flight elsewhere, with the record
        **local,
        "answers": [["r1", 500, True], ["r2", 500, True], ["r3", 500, True]],
        "cleaned": ["r1", "r2", "r3"],
        "stops": ["ShutdownRequestMessage"],
    }
    assert dead["oom, the last replica"] == {**ended, "exit": 81}
    assert dead["vanished, the last replica"] == {**ended, "exit": 85}
    assert dead["inline, executor lost"] == {**ended, "exit": 80}
    assert dead["remote, the last replica"] == {
        "answers": [["r1", 500, False], ["r2", 500, False], ["r3", 500, True]],  # lost, then the window passed
        "cleaned": ["r1", "r2", "r3"],
        "stops": ["ShutdownRequestMessage"],
        "exit": 86,
        "unregistered": ["tcp://10.0.0.7:5000"],
        "window": [7, 86],
    }
    assert dead["remote, its fatal record"] == {  # r1's own answer is its record; r2 was on the replica
        "answers": [["r1", 500, True], ["r2", 500, False], ["r3", 500, True]],
        "cleaned": ["r1", "r2", "r3"],
        "stops": ["ShutdownRequestMessage"],
        "exit": 81,
        "unregistered": ["tcp://10.0.0.7:5000"],
        "window": [7, 81],
    }
    if tree == "series":
        assert dead == request.getfixturevalue("on_the_release")["dead_replica"]


_MEMBERSHIP_TARGETS = ("MembershipController.start", "MembershipController._do_register")


@pytest.mark.parametrize("tree", ["release", "series"])
def test_the_membership_controller_drives_the_cores_head_policy_on_both_trees(
    tree: str, request: pytest.FixtureRequest
) -> None:
    """A head's membership controller that starts makes the stages decide when the head ends (a fatal
    answer no longer ends it), and a replica that registers closes its stage's rejoin window; an error
    message's 503 then gets its stage's `Retry-After`: the plugin's patches on the release, vLLM-Omni's
    own calls on the series (patches 26 and 27), the same core state."""
    report = probe_report(tree, request)
    patched = {key.partition(":")[2] for key in report["patched"]} & set(_MEMBERSHIP_TARGETS)
    assert patched == (set(_MEMBERSHIP_TARGETS) if tree == "release" else set())
    membership = dict(report["membership"])
    unavailable = membership.pop("unavailable")
    assert membership == {"stages_decide": [False, True], "attached": True, "window_open": False}
    # `_raise_nonfatal_error_message`: a 503 gets its stage's `Retry-After` only on a head waiting for a replica.
    assert [answer[1:] for answer in unavailable.values()] == [[503, 5, None], [503, 5, RETRY_AFTER_S]]
    if tree == "series":
        assert unavailable == request.getfixturevalue("on_the_release")["membership"]["unavailable"]


@pytest.mark.parametrize("tree", ["release", "series"])
def test_a_headless_launcher_ends_with_its_replicas_code(tree: str, request: pytest.FixtureRequest) -> None:
    """A headless launcher whose diffusion replica ended: the release with the plugin's replacement and
    the patched tree with nothing patched there reap the replica before reading its code and exit with
    its documented code (85 for a signal or an unknown code); a clean end lets the launcher return."""
    report = probe_report(tree, request)
    assert report["launcher"] == {
        "patched": tree == "release",
        "exits": {"clean": None, "fatal": 80, "oom": 81, "link_lost": 86, "exception": 85, "killed": 85},
    }
